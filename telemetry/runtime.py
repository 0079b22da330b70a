"""Temporal's own metrics, merged into the worker's one ``/metrics`` endpoint.

The Temporal runtime (Rust core) emits two kinds of metric: its own worker
metrics (task slots, schedule-to-start latency, failures) and the ones our
workflows record through ``workflow.metric_meter()``. Both go into a
``MetricBuffer`` that :class:`TemporalMetricsCollector` drains into
prometheus-client's ``REGISTRY``, so one scrape target carries everything and
there is no second port to forget in a scrape config.

Names on the endpoint follow prometheus-client's conventions, so a dashboard
can treat both sources alike:

- Temporal core metrics carry the ``temporal_`` prefix (the runtime's default);
  our own workflow metrics are not prefixed.
- Counters gain ``_total``.
- Duration histograms (unit ``s``; the buffer reports them as float seconds)
  gain ``_seconds`` when the name lacks it, e.g.
  ``temporal_workflow_task_schedule_to_start_latency_seconds``.
- Contract checks and violations counted in workflows are added to the
  activities' prometheus-client counters of the same name (``_SHARED``), with
  only those counters' labels, so each is one family on the endpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_GAUGE,
    BUFFERED_METRIC_KIND_HISTOGRAM,
    BufferedMetricUpdate,
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
)

from . import workflow_metrics
from .labels import BoundedLabel
from .metrics import CONTRACT_CHECKS, CONTRACT_VIOLATIONS, LATENCY_BUCKETS, REGISTRY

TEMPORAL_PREFIX = "temporal_"

# Temporal's own labels on our workflow metrics: the operator's namespaces, task queues and workflow types.
_TEMPORAL_LABELS = frozenset({"namespace", "task_queue", "workflow_type"})
_WORKFLOW_LABEL_LIMIT = 100
"""Distinct values per label of one workflow metric (e.g. pipeline contract names) before ``other``."""

# Large, because the buffer drops updates (and logs) when full; it is drained
# every second and on every scrape.
_BUFFER_SIZE = 200_000
_DRAIN_INTERVAL_SECONDS = 1.0

_SHARED: dict[str, Counter] = {
    "agentsteps_contract_checks": CONTRACT_CHECKS,
    "agentsteps_contract_violations": CONTRACT_VIOLATIONS,
}
"""Workflow-side counters that belong to an activity-side family (see ``workflow_metrics.record_check``)."""

_COUNT_BUCKETS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144)
RUN_LATENCY_BUCKETS = (*LATENCY_BUCKETS, 600, 900, 1800, 3600)
"""Runs and turns take minutes: past the request buckets' 300 s top, up to an hour, so a p95 alert can fire."""
_WAIT_BUCKETS = (*LATENCY_BUCKETS, 600, 1800, 3600, 14400, 43200, 86400)
_BUCKETS_BY_NAME: dict[str, Sequence[float]] = {
    "agentsteps_agent_steps_per_run": _COUNT_BUCKETS,
    "agentsteps_agent_run_seconds": RUN_LATENCY_BUCKETS,
    "agentsteps_session_turn_seconds": RUN_LATENCY_BUCKETS,
    # An approval may wait for a person up to a day (the spec's default approval timeout).
    "agentsteps_approval_wait_seconds": _WAIT_BUCKETS,
}

TEMPORAL_WORKER_METRICS = {
    "temporal_worker_task_slots_available": "Free task slots, by worker_type (workflow, activity, local activity).",
    "temporal_worker_task_slots_used": "Task slots in use, by worker_type.",
    "temporal_workflow_task_schedule_to_start_latency_seconds": "Workflow task wait in the task queue.",
    "temporal_activity_schedule_to_start_latency_seconds": "Activity task wait in the task queue.",
    "temporal_workflow_task_execution_failed_total": "Failed workflow tasks (workflow code raised or was "
    "non-deterministic).",
    "temporal_activity_execution_failed_total": "Failed activity attempts.",
    "temporal_activity_execution_latency_seconds": "Activity attempt latency, by activity_type.",
    "temporal_num_pollers": "Open long polls, by poller_type (workflow_task, sticky_workflow_task, activity_task).",
    "temporal_workflow_task_queue_poll_succeed_total": "Workflow task polls that brought a task.",
    "temporal_workflow_task_queue_poll_empty_total": "Workflow task polls that expired without a task.",
    "temporal_activity_poll_no_task_total": "Activity task polls that expired without a task.",
    "temporal_sticky_cache_hit_total": "Workflow tasks served from the worker's workflow cache.",
    "temporal_sticky_cache_miss_total": "Sticky workflow tasks whose run was not cached (its history is fetched).",
    "temporal_sticky_cache_size": "Workflows in the worker's cache.",
    "temporal_sticky_cache_total_forced_eviction_total": "Workflows evicted from the cache to make room or after a "
    "failure.",
    "temporal_request_failure_total": "Failed worker-to-service RPCs, by operation and status_code.",
    "temporal_request_latency_seconds": "Worker-to-service RPC latency, by operation.",
}
"""The Temporal SDK metrics the dashboard and alerts rely on, as exported here."""


def exported_name(name: str, kind: int, unit: str | None) -> str:
    """The family name under which a buffered metric appears on ``/metrics`` (counters add ``_total``)."""
    if kind == BUFFERED_METRIC_KIND_HISTOGRAM and unit == "s" and not name.endswith("_seconds"):
        return name + "_seconds"
    return name


def _label_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _buckets_for(name: str, unit: str | None) -> Sequence[float]:
    if name in _BUCKETS_BY_NAME:
        return _BUCKETS_BY_NAME[name]
    if unit == "s":
        return LATENCY_BUCKETS
    # Unitless or millisecond histograms from core: spread wide enough to be useful.
    return (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 60000)


@dataclass
class _Histogram:
    bounds: Sequence[float]
    counts: list[int]
    total: float = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1
        self.counts[-1] += 1  # +Inf
        self.total += value


@dataclass
class _Family:
    name: str
    kind: int
    unit: str | None
    description: str
    series: dict[tuple[tuple[str, str], ...], Any] = field(default_factory=dict)


_COUNTER_SCALE = {workflow_metrics.TENANT_SPEND_USD: 1e-6}
"""Counters the meter takes as integers in a smaller unit (micro-dollars), exported in the named one."""


class TemporalMetricsCollector:
    """A prometheus-client collector over a Temporal ``MetricBuffer``.

    Counters arrive as deltas, gauges as values, histograms as single
    observations; this keeps the running state the exposition format needs.
    """

    def __init__(self, buffer: MetricBuffer) -> None:
        self._buffer = buffer
        self._lock = threading.Lock()
        self._families: dict[str, _Family] = {}
        self._bounded: dict[tuple[str, str], BoundedLabel] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def describe(self) -> list[Metric]:
        # Families appear lazily as the runtime emits them; registering must
        # not call collect() (which would drain before the runtime is in use).
        return []

    def drain(self) -> None:
        with self._lock:
            self._apply(self._buffer.retrieve_updates())

    def _label(self, metric: str, name: str, value: Any) -> str:
        """Our workflow metrics' labels are values from specs and pipelines (contract names...): bounded here."""
        text = _label_value(value)
        if not metric.startswith("agentsteps_") or name in _TEMPORAL_LABELS:
            return text
        bounded = self._bounded.get((metric, name))
        if bounded is None:
            bounded = self._bounded[(metric, name)] = BoundedLabel(limit=_WORKFLOW_LABEL_LIMIT)
        return bounded.admit(text)

    def _apply(self, updates: Iterable[BufferedMetricUpdate]) -> None:
        for update in updates:
            metric = update.metric
            shared = _SHARED.get(metric.name)
            if shared is not None:
                labels = {
                    name: self._label(metric.name, name, update.attributes.get(name, "")) for name in shared._labelnames
                }
                shared.labels(**labels).inc(update.value)
                continue
            family = self._families.get(metric.name)
            if family is None:
                family = _Family(metric.name, metric.kind, metric.unit, metric.description or metric.name)
                self._families[metric.name] = family
            key = tuple(sorted((str(k), self._label(metric.name, str(k), v)) for k, v in update.attributes.items()))
            if family.kind == BUFFERED_METRIC_KIND_COUNTER:
                family.series[key] = family.series.get(key, 0) + update.value * _COUNTER_SCALE.get(metric.name, 1)
            elif family.kind == BUFFERED_METRIC_KIND_GAUGE:
                family.series[key] = update.value
            elif family.kind == BUFFERED_METRIC_KIND_HISTOGRAM:
                hist = family.series.get(key)
                if hist is None:
                    bounds = _buckets_for(family.name, family.unit)
                    hist = family.series[key] = _Histogram(bounds, [0] * (len(bounds) + 1))
                hist.observe(float(update.value))

    def collect(self) -> Iterable[Metric]:
        self.drain()
        with self._lock:
            families = [self._render(f) for f in self._families.values()]
        return families

    def _render(self, family: _Family) -> Metric:
        label_names = sorted({name for key in family.series for name, _ in key})

        def values(key: tuple[tuple[str, str], ...]) -> list[str]:
            # A label absent from one series is "" there, which Prometheus treats as absent.
            as_dict = dict(key)
            return [as_dict.get(name, "") for name in label_names]

        name = exported_name(family.name, family.kind, family.unit)
        if family.kind == BUFFERED_METRIC_KIND_COUNTER:
            counter = CounterMetricFamily(name, family.description, labels=label_names)
            for key, value in family.series.items():
                counter.add_metric(values(key), value)
            return counter
        if family.kind == BUFFERED_METRIC_KIND_GAUGE:
            gauge = GaugeMetricFamily(name, family.description, labels=label_names)
            for key, value in family.series.items():
                gauge.add_metric(values(key), value)
            return gauge
        histogram = HistogramMetricFamily(name, family.description, labels=label_names)
        for key, hist in family.series.items():
            buckets = [(_format_bound(b), c) for b, c in zip(hist.bounds, hist.counts)]
            buckets.append(("+Inf", hist.counts[-1]))
            histogram.add_metric(values(key), buckets, hist.total)
        return histogram

    def start(self, interval: float = _DRAIN_INTERVAL_SECONDS) -> None:
        """Drain in the background too, so a worker nobody scrapes never fills the buffer."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(interval):
                self.drain()

        self._thread = threading.Thread(target=loop, name="temporal-metrics-drain", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _format_bound(bound: float) -> str:
    return repr(float(bound))


_installed: dict[int, TemporalMetricsCollector] = {}


def build_runtime(
    settings: object | None = None,
    *,
    registry: CollectorRegistry = REGISTRY,
    global_tags: Mapping[str, str] | None = None,
) -> Runtime:
    """A Temporal ``Runtime`` whose metrics land in ``registry`` (the worker's ``/metrics``).

    Pass it to ``Client.connect(..., runtime=...)``; workers built on that
    client use it. One collector per registry: building again replaces the
    previous collector, so two runtimes never export the same series twice.
    ``settings`` is accepted for symmetry with the other builders and unused.
    """
    del settings
    buffer = MetricBuffer(_BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)
    runtime = Runtime(
        telemetry=TelemetryConfig(
            metrics=buffer,
            global_tags=dict(global_tags or {}),
            # service_name would be one constant label on every series; Prometheus's job label already says it.
            attach_service_name=False,
        )
    )
    collector = TemporalMetricsCollector(buffer)
    previous = _installed.pop(id(registry), None)
    if previous is not None:
        previous.stop()
        registry.unregister(previous)
    registry.register(collector)
    _installed[id(registry)] = collector
    collector.start()
    return runtime


def collector_for(registry: CollectorRegistry = REGISTRY) -> TemporalMetricsCollector | None:
    """The collector the last :func:`build_runtime` installed on ``registry``, for tests and shutdown."""
    return _installed.get(id(registry))
