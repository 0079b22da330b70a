"""What an operator reads off /metrics beyond the engine's own counters.

- ``process_*``: the worker process's CPU, memory, file descriptors and start time;
- ``agentsteps_worker_slots{kind}``: the capacity the worker was sized to, which
  the Temporal worker really uses (its own slots-available gauge agrees);
- exemplars: an LLM latency observation carries the trace id of its
  ``chat {model}`` span, shown when the scraper asks for OpenMetrics.

Real worker, real dev server, scripted model, the endpoint read over HTTP.
"""

from __future__ import annotations

import re
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_support import make_spec, run_agent

from agentsteps.contracts.config.settings import TracingSettings
from agentsteps.telemetry import tracing
from agentsteps.telemetry.runtime import collector_for
from agentsteps.telemetry.server import start_metrics_server
from agentsteps.worker import running_worker

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@pytest.fixture
def endpoint():
    server = start_metrics_server(0, host="127.0.0.1")
    yield server
    server.stop()


def fetch(url: str, accept: str | None = None) -> str:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    return urllib.request.urlopen(request, timeout=5).read().decode()


def samples(body: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_process_metrics_describe_the_worker_process(endpoint):
    scraped = samples(fetch(endpoint.url + "/metrics"))
    (rss,) = scraped["process_resident_memory_bytes"]
    assert rss.value > 10 * 2**20
    (cpu,) = scraped["process_cpu_seconds_total"]
    assert cpu.value > 0
    assert scraped["process_start_time_seconds"][0].value > 1.7e9
    assert scraped["process_open_fds"][0].value > 0


async def test_capacity_gauge_reports_the_sizes_the_temporal_worker_really_uses(
    metered_client, settings, scripted, endpoint
):
    sized = settings.model_copy(
        update={
            "max_concurrent_activities": 7,
            "max_concurrent_workflow_tasks": 3,
            "max_cached_workflows": 11,
            "sandbox_processes": 2,
        }
    )
    scripted.set_script({"replies": [{"content": "sized"}]})
    async with running_worker(metered_client, sized):
        await run_agent(metered_client, sized.task_queue, make_spec(tools=[]))
        collector_for().drain()
        scraped = samples(fetch(endpoint.url + "/metrics"))
    slots = {s.labels["kind"]: s.value for s in scraped["agentsteps_worker_slots"]}
    assert slots == {"activity": 7, "workflow_task": 3, "cached_workflows": 11, "sandbox_processes": 2}
    temporal = {
        s.labels["worker_type"]: s.value
        for s in scraped["temporal_worker_task_slots_available"]
        if s.labels.get("task_queue") == sized.task_queue
    }
    assert temporal["ActivityWorker"] == 7 and temporal["WorkflowWorker"] == 3


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tracing.configure_tracing(TracingSettings(), exporter=exporter)
    yield exporter
    tracing.shutdown_tracing()


async def test_llm_latency_exemplar_links_to_the_chat_span(metered_client, settings, scripted, endpoint, spans):
    scripted.set_script({"replies": [{"content": "traced"}]})
    async with running_worker(metered_client, settings):
        await run_agent(metered_client, settings.task_queue, make_spec(tools=[]))
    chat = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert chat, "the LLM call made no span"
    trace_ids = {format(s.context.trace_id, "032x") for s in chat}

    body = fetch(endpoint.url + "/metrics", accept=OPENMETRICS)
    exemplars = re.findall(
        r'^agentsteps_llm_request_seconds_bucket\{[^}]*\} \S+ # \{trace_id="([0-9a-f]{32})"\}', body, re.M
    )
    assert set(exemplars) & trace_ids, "no latency bucket points at the chat span"
    # The classic text format has no exemplars; a scraper that did not ask gets none.
    assert "trace_id" not in fetch(endpoint.url + "/metrics")


def test_no_exemplar_without_a_recorded_span():
    from opentelemetry.trace import INVALID_SPAN

    tracing.shutdown_tracing()
    with tracing.llm_span("openai", "m") as span:  # tracing off: a non-recording span
        assert span.trace_id is None
    assert tracing.LLMSpan(INVALID_SPAN, False).trace_id is None
