"""The worker's /metrics endpoint: prometheus-client metrics and Temporal's, merged; replay moves nothing.

A real worker (``worker.running_worker``) on a client whose Runtime comes from
``telemetry.runtime.build_runtime``, real agent runs against the scripted
model server, and the endpoint read over HTTP.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import uuid

import pytest
import pytest_asyncio
from agent_support import make_spec, run_agent, weather_then_answer
from prometheus_client.parser import text_string_to_metric_families
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agentsteps.contracts import AgentInput
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.telemetry.metrics import REGISTRY
from agentsteps.telemetry.runtime import TEMPORAL_WORKER_METRICS, build_runtime, collector_for
from agentsteps.telemetry.server import start_metrics_server
from agentsteps.telemetry.workflow_metrics import WORKFLOW_METRICS
from agentsteps.worker import running_worker
from agentsteps.workflows.agent import AgentWorkflow


@pytest_asyncio.fixture(scope="module")
async def metered_client(temporal_env) -> Client:
    """A client on a Runtime whose metrics land in the worker's registry (as worker.py builds it)."""
    runtime = build_runtime()
    return await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        data_converter=pydantic_data_converter,
        runtime=runtime,
    )


@pytest.fixture
def metrics_server():
    server = start_metrics_server(0, host="127.0.0.1")
    yield server
    server.stop()


def scrape(url: str) -> dict[str, list]:
    """Sample name -> samples, parsed with prometheus-client's own parser."""
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def exported_sample(name: str, kind: str) -> str:
    return name + ("_total" if kind == "counter" else "_count")


async def test_endpoint_serves_agent_workflow_and_temporal_sdk_metrics_together(
    metered_client, settings, scripted, metrics_server
):
    scripted.set_script(weather_then_answer())
    async with running_worker(metered_client, settings):
        result = await run_agent(metered_client, settings.task_queue, make_spec())
    assert result.status == "completed"

    samples = scrape(metrics_server.url + "/metrics")

    # Activity metrics (prometheus-client objects).
    tokens = {s.labels["direction"]: s.value for s in samples["agentsteps_llm_tokens_total"]}
    assert tokens["input"] > 0 and tokens["output"] > 0
    assert any(
        s.labels["tool"] == "get_weather" and s.labels["outcome"] == "ok"
        for s in samples["agentsteps_tool_calls_total"]
    )
    # Workflow metrics from workflow.metric_meter(), under their own names (no temporal_ prefix).
    runs = [s for s in samples["agentsteps_agent_runs_total"] if s.labels["task_queue"] == settings.task_queue]
    assert [(r.labels["outcome"], r.value) for r in runs] == [("completed", 1.0)]
    for metric in WORKFLOW_METRICS:
        if metric.name in ("agentsteps_reprompts", "agentsteps_degradations"):
            continue  # this clean run had neither
        if metric.name.startswith(("agentsteps_session", "agentsteps_approval")):
            continue  # a one-shot run without approvals records no session or approval metrics
        if metric.name == "agentsteps_malformed_inputs":
            continue  # counted only for a wrongly shaped start or signal
        if metric.name.startswith(("agentsteps_quota", "agentsteps_tenant")):
            continue  # a run without [worker.quotas] reserves nothing: no quota or tenant series
        assert exported_sample(metric.name, metric.kind) in samples, metric.name
    steps = [s for s in samples["agentsteps_agent_steps_per_run_sum"] if s.labels["task_queue"] == settings.task_queue]
    assert steps[0].value == len(result.steps)
    # Temporal SDK runtime metrics, with durations in seconds.
    # Counted only when it happens: failures, polls that expire empty (after 60 s), cache misses and evictions.
    on_event = (
        "_failed_total",
        "_failure_total",
        "_poll_empty_total",
        "_poll_no_task_total",
        "_miss_total",
        "_forced_eviction_total",
    )
    for name in TEMPORAL_WORKER_METRICS:
        if name.endswith(on_event):
            continue  # tests/deploy/test_telemetry_dashboard.py makes each of these happen
        sample = name + "_count" if name.endswith("_seconds") else name
        assert sample in samples, name
    slot_types = {s.labels["worker_type"] for s in samples["temporal_worker_task_slots_available"]}
    assert {"WorkflowWorker", "ActivityWorker"} <= slot_types
    # Bounded labels: no workflow or run ids anywhere.
    for series in samples.values():
        for sample in series:
            assert not {"workflow_id", "run_id", "activity_id"} & set(sample.labels)


async def test_health_and_readiness_endpoints_answer_for_probes():
    ready = {"value": False}
    server = start_metrics_server(0, host="127.0.0.1", ready=lambda: ready["value"])
    try:
        assert urllib.request.urlopen(server.url + "/healthz", timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen(server.url + "/readyz", timeout=5)
        assert not_ready.value.code == 503
        ready["value"] = True
        assert urllib.request.urlopen(server.url + "/readyz", timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url + "/nope", timeout=5)
        assert missing.value.code == 404
    finally:
        server.stop()


def counter_snapshot() -> dict[tuple, float]:
    """Every agentsteps_* sample value, from the registry (activity metrics and drained workflow metrics)."""
    collector = collector_for(REGISTRY)
    assert collector is not None
    collector.drain()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in REGISTRY.collect()
        if family.name.startswith("agentsteps_")
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


async def test_replaying_a_recorded_history_moves_no_counter(metered_client, settings, scripted):
    # A run with a re-prompt, so counters of every workflow-side kind have moved once.
    scripted.set_script(
        {
            "rules": [
                {"match": {"role": "user"}, "times": 1, "reply": {"content": "no json"}},
                {
                    "match": {"any_contains": "broke the response contract"},
                    "reply": {"json": {"warmest_city": "Tokyo"}},
                },
            ]
        }
    )
    schema = {"type": "object", "required": ["warmest_city"], "properties": {"warmest_city": {"type": "string"}}}
    workflow_id = f"replay-{uuid.uuid4().hex[:8]}"
    async with running_worker(metered_client, settings):
        handle = await metered_client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(output_schema=schema), input="which city?"),
            id=workflow_id,
            task_queue=settings.task_queue,
        )
        await handle.result()
    history = await handle.fetch_history()

    before = counter_snapshot()
    mine = {k: v for k, v in before.items() if ("task_queue", settings.task_queue) in k[1]}
    assert mine[("agentsteps_agent_runs_total", _labels(settings, outcome="completed"))] == 1
    assert any(name == "agentsteps_reprompts_total" for name, _ in mine)

    replayer = Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        runtime=metered_client.service_client.config.runtime,
    )
    result = await replayer.replay_workflow(history)
    assert result.replay_failure is None

    assert counter_snapshot() == before


def _labels(settings, **extra: str) -> tuple:
    labels = {"namespace": "default", "task_queue": settings.task_queue, "workflow_type": AGENT_WORKFLOW, **extra}
    return tuple(sorted(labels.items()))
