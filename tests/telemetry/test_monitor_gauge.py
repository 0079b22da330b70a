"""The dashboard's stalled-tickets value follows the monitor's latest tick, on whichever worker it ran (issue 14 #5).

Two real worker processes, each with its own ``/metrics``, run
``monitor.record``; a real Prometheus scrapes both; the query is the
dashboard's own "Stalled tickets" panel. Both workers stay up, so the first
worker's older, higher value is still exported when the second ticks: the old
query (``max by (monitor)`` of the gauge) read it.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest_asyncio
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from process_support import kill, start_worker_process
    from prometheus_support import Prometheus, as_grafana_sends, dashboard_query
    from temporalio.worker import Worker

    from agentsteps.contracts.monitor import MonitorMetrics
    from agentsteps.contracts.names import MONITOR_RECORD

WORKER_SCRIPT = Path(__file__).parents[1] / "support" / "monitor_gauge_worker.py"
MONITOR = "gauge-test"


# Unsandboxed: a one-line workflow; the sandbox would re-import this module for nothing.
@workflow.defn(name="MonitorGaugeTick", sandboxed=False)
class RecordTick:
    """Records a tick's metrics on the worker serving ``queue``, as ``MonitorWorkflow`` does at the end of a tick."""

    @workflow.run
    async def run(self, queue: str, stalled: int) -> None:
        metrics = MonitorMetrics(monitor=MONITOR, run_id=workflow.info().run_id, stalled=stalled, nudged=0, escalated=0)
        await workflow.execute_activity(
            MONITOR_RECORD, metrics, task_queue=queue, start_to_close_timeout=timedelta(seconds=10)
        )


@pytest_asyncio.fixture
async def two_workers(client, tmp_path):
    """Workers A and B (processes), a Prometheus scraping both, and a workflow worker to tick on either."""
    address = client.service_client.config.target_host
    queues = {name: f"gauge-{name}-{uuid.uuid4().hex[:6]}" for name in "AB"}
    procs, ports = {}, {}
    prometheus = None
    try:
        for name, queue in queues.items():
            procs[name] = start_worker_process(WORKER_SCRIPT, address, client.namespace, queue)
            ports[name] = int(procs[name].stdout.readline())
        prometheus = Prometheus([f"127.0.0.1:{port}" for port in ports.values()], tmp_path)
        prometheus.wait_ready()
        prometheus.wait_for('count(temporal_num_pollers{poller_type="activity_task"})', lambda v: v == 2)
        ticks = f"gauge-ticks-{uuid.uuid4().hex[:6]}"
        async with Worker(client, task_queue=ticks, workflows=[RecordTick]):

            async def tick(name: str, stalled: int) -> None:
                await client.execute_workflow(
                    RecordTick.run, args=[queues[name], stalled], id=f"{ticks}-{uuid.uuid4().hex[:6]}", task_queue=ticks
                )
                instance = f"127.0.0.1:{ports[name]}"
                prometheus.wait_for(
                    f'agentsteps_monitor_stalled_tickets{{instance="{instance}", monitor="{MONITOR}"}}',
                    lambda v: v == stalled,
                )

            yield tick, prometheus, {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    finally:
        if prometheus is not None:
            prometheus.stop()
        for proc in procs.values():
            kill(proc)


def _panel(prometheus: Prometheus) -> list[float]:
    result = prometheus.query(as_grafana_sends(dashboard_query("Stalled tickets")))
    return [float(r["value"][1]) for r in result if r["metric"].get("monitor") == MONITOR]


async def test_the_panel_shows_the_latest_tick_not_a_stale_higher_one(two_workers):
    tick, prometheus, instances = two_workers
    await tick("A", 5)
    assert _panel(prometheus) == [5]
    await tick("B", 2)
    # Worker A still exports 5: the per-worker maximum (the old query) is stale.
    stale = prometheus.query(f'max by (monitor) (agentsteps_monitor_stalled_tickets{{monitor="{MONITOR}"}})')
    assert float(stale[0]["value"][1]) == 5
    assert _panel(prometheus) == [2]
    await tick("A", 7)
    assert _panel(prometheus) == [7]
    # "Last monitor tick" is the newest tick anywhere: A's, just now.
    (a_stamp,) = prometheus.query(
        f'agentsteps_monitor_last_tick_timestamp_seconds{{instance="{instances["A"]}", monitor="{MONITOR}"}}'
    )
    last = prometheus.query(as_grafana_sends(dashboard_query("Last monitor tick")))
    assert [float(r["value"][1]) for r in last if r["metric"]["monitor"] == MONITOR] == [
        float(a_stamp["value"][1]) * 1000
    ]


async def test_a_late_retry_of_an_older_tick_does_not_overwrite_a_newer_one():
    import dataclasses
    from datetime import UTC, datetime

    from temporalio.testing import ActivityEnvironment

    from agentsteps.activities.monitor.activities import MonitorActivities
    from agentsteps.telemetry.metrics import MONITOR_LAST_TICK, MONITOR_STALLED_TICKETS

    monitor = f"late-retry-{uuid.uuid4().hex[:6]}"
    activities, env = MonitorActivities(), ActivityEnvironment()
    newer, older = datetime(2026, 5, 2, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC)
    for when, stalled in ((newer, 3), (older, 9)):
        env.info = dataclasses.replace(env.info, scheduled_time=when)
        await env.run(
            activities.record, MonitorMetrics(monitor=monitor, run_id=str(when), stalled=stalled, nudged=1, escalated=0)
        )
    assert MONITOR_STALLED_TICKETS.labels(monitor=monitor)._value.get() == 3
    assert MONITOR_LAST_TICK.labels(monitor=monitor)._value.get() == newer.timestamp()
