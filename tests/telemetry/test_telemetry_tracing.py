"""GenAI spans, content opt-in, Temporal workflow -> activity links, and OTLP export.

Spans are read back with the OpenTelemetry SDK's InMemorySpanExporter; the
OTLP test posts to a real loopback HTTP collector and decodes the protobuf.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    from agentsteps.contracts.config.settings import TracingSettings, WorkerSettings
    from agentsteps.telemetry import tracing
    from agentsteps.telemetry.tracing import configure_tracing, llm_span, tool_span, tracing_interceptors


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    configure_tracing(TracingSettings(), exporter=exporter)
    yield exporter
    tracing.shutdown_tracing()


@pytest.fixture
def content_spans():
    exporter = InMemorySpanExporter()
    configure_tracing(TracingSettings(capture_content=True), exporter=exporter)
    yield exporter
    tracing.shutdown_tracing()


MESSAGES = [{"role": "user", "content": "my phone number is 555-0100"}]


def test_chat_span_carries_genai_attributes_and_no_content_by_default(spans):
    with llm_span("openai", "gpt-4o-2024-08-06", temperature=0.2, max_tokens=256) as span:
        span.record_input(MESSAGES)
        span.record_response(
            input_tokens=120,
            output_tokens=30,
            finish_reasons=["tool_calls"],
            response_model="gpt-4o-2024-08-06",
            output_messages=[{"role": "assistant", "content": "ok"}],
        )

    (finished,) = spans.get_finished_spans()
    assert finished.name == "chat gpt-4o-2024-08-06"
    assert finished.kind is SpanKind.CLIENT
    attrs = dict(finished.attributes)
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-2024-08-06",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.response.model": "gpt-4o-2024-08-06",
    }
    assert not tracing.CONTENT_ATTRIBUTES & set(attrs)
    assert finished.resource.attributes["service.name"] == "agentsteps-worker"


def test_prompt_and_response_recorded_only_when_opted_in(content_spans):
    with llm_span("anthropic", "claude-sonnet-4-20250514") as span:
        span.record_input(MESSAGES)
        span.record_response(
            input_tokens=1,
            output_tokens=1,
            finish_reasons=["stop"],
            output_messages=[{"role": "assistant", "content": "noted"}],
        )
    with tool_span("get_weather", call_id="call_1") as tool:
        tool.record_arguments({"city": "Paris"})
        tool.record_result({"temperature_c": 18.5})

    chat, tool_finished = content_spans.get_finished_spans()
    assert "555-0100" in chat.attributes["gen_ai.input.messages"]
    assert '"noted"' in chat.attributes["gen_ai.output.messages"]
    assert tool_finished.attributes["gen_ai.tool.call.arguments"] == '{"city": "Paris"}'
    assert tool_finished.attributes["gen_ai.tool.call.result"] == '{"temperature_c": 18.5}'


def test_tool_span_is_named_after_the_tool_and_types_its_error(spans):
    with pytest.raises(TimeoutError):
        with tool_span("search_issues", tool_type="extension") as tool:
            tool.record_arguments({"query": "secret"})
            raise TimeoutError("backend slow")

    (finished,) = spans.get_finished_spans()
    assert finished.name == "execute_tool search_issues"
    assert finished.attributes["gen_ai.operation.name"] == "execute_tool"
    assert finished.attributes["gen_ai.tool.name"] == "search_issues"
    assert finished.attributes["gen_ai.tool.type"] == "extension"
    assert finished.attributes["error.type"] == "TimeoutError"
    assert finished.status.status_code is StatusCode.ERROR
    assert "gen_ai.tool.call.arguments" not in finished.attributes


def test_worker_settings_carry_tracing_from_the_environment(tmp_path):
    from agentsteps.client.settings import load_settings

    empty = tmp_path / "empty.toml"
    empty.write_text("")
    settings = load_settings(
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            "AGENTSTEPS_TRACE_CONTENT": "true",
            "AGENTSTEPS_CONFIG": str(empty),
        }
    )
    assert settings.tracing.otlp_endpoint == "http://collector:4318"
    assert settings.tracing.capture_content is True
    assert load_settings(env={"AGENTSTEPS_CONFIG": str(empty)}).tracing.capture_content is False


@activity.defn(name="telemetry_test.chat")
async def chat_activity(model: str) -> str:
    with llm_span("openai", model) as span:
        span.record_response(input_tokens=3, output_tokens=2, finish_reasons=["stop"])
    return "done"


@workflow.defn(name="TelemetryTracingWorkflow")
class TracedWorkflow:
    @workflow.run
    async def run(self, model: str) -> str:
        return await workflow.execute_activity(chat_activity, model, start_to_close_timeout=timedelta(seconds=10))


async def test_chat_span_in_an_activity_links_to_its_workflow_trace(temporal_env, spans):
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        interceptors=tracing_interceptors(WorkerSettings()),
    )
    task_queue = f"tracing-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=task_queue, workflows=[TracedWorkflow], activities=[chat_activity]):
        assert (
            await client.execute_workflow(TracedWorkflow.run, "gpt-4o-2024-08-06", id=task_queue, task_queue=task_queue)
            == "done"
        )

    by_name = {s.name: s for s in spans.get_finished_spans()}
    chat = by_name["chat gpt-4o-2024-08-06"]
    run_activity = by_name["RunActivity:telemetry_test.chat"]
    run_workflow = by_name["RunWorkflow:TelemetryTracingWorkflow"]
    start_workflow = by_name["StartWorkflow:TelemetryTracingWorkflow"]
    # One trace from the client's start through the workflow to the model call.
    assert {chat.context.trace_id, run_activity.context.trace_id, run_workflow.context.trace_id} == {
        start_workflow.context.trace_id
    }
    assert chat.parent.span_id == run_activity.context.span_id
    assert chat.attributes["gen_ai.usage.output_tokens"] == 2


def test_otlp_exporter_sends_genai_spans_to_the_configured_collector():
    received: list[tuple[str, bytes]] = []

    # Defined here, not at module level: the workflow sandbox re-imports this
    # module and refuses to subclass http.server classes there.
    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    collector = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
        configure_tracing(TracingSettings(otlp_endpoint=endpoint, service_name="agentsteps-test"))
        with llm_span("openai", "gpt-4o-mini-2024-07-18") as span:
            span.record_response(input_tokens=7, output_tokens=5, finish_reasons=["stop"])
        tracing.shutdown_tracing()  # flushes the batch processor
    finally:
        collector.shutdown()
        collector.server_close()

    ((path, body),) = received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    resource_spans = request.resource_spans[0]
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    assert service == "agentsteps-test"
    (span_pb,) = resource_spans.scope_spans[0].spans
    assert span_pb.name == "chat gpt-4o-mini-2024-07-18"
    attrs = {a.key: a.value for a in span_pb.attributes}
    assert attrs["gen_ai.usage.input_tokens"].int_value == 7


def test_no_exporter_is_configured_by_default():
    provider = configure_tracing(WorkerSettings())
    try:
        # Only the SDK's no-op composite processor: spans are made for links but go nowhere.
        assert provider._active_span_processor._span_processors == ()
    finally:
        tracing.shutdown_tracing()


def test_a_worker_that_exports_nothing_makes_no_spans_and_installs_no_interceptor():
    configure_tracing(WorkerSettings())
    try:
        # No trace header in every command, no span per task: nothing would receive them.
        assert tracing.tracing_interceptors(WorkerSettings()) == []
        with llm_span("openai", "gpt-4o-2024-08-06") as span:
            assert not span.span.is_recording() and span.trace_id is None
    finally:
        tracing.shutdown_tracing()
    exporter = InMemorySpanExporter()
    configure_tracing(TracingSettings(), exporter=exporter)
    try:
        assert len(tracing.tracing_interceptors(WorkerSettings())) == 1
        with llm_span("openai", "gpt-4o-2024-08-06"):
            pass
        assert [s.name for s in exporter.get_finished_spans()] == ["chat gpt-4o-2024-08-06"]
    finally:
        tracing.shutdown_tracing()
