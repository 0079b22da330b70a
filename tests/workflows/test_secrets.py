"""API keys stay in the worker: not in workflow inputs or history (payloads decoded), prompts, logs,
metric labels or values, span attributes (content capture on), or anything under the state dir."""

from __future__ import annotations

import logging
import uuid

from agent_support import make_spec, weather_then_answer
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr
from secret_scan import SecretScan

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import TracingSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.telemetry import tracing
from agentsteps.telemetry.tracing import configure_tracing
from agentsteps.worker import running_worker

SECRET = "sk-test-" + uuid.uuid4().hex


async def test_api_key_never_reaches_history_prompts_logs_metrics_or_spans(client, settings, scripted, caplog):
    caplog.set_level(logging.DEBUG)
    spans = InMemorySpanExporter()
    configure_tracing(TracingSettings(capture_content=True), exporter=spans)
    script = weather_then_answer()
    script["api_key"] = SECRET
    scripted.set_script(script)
    keyed = settings.model_copy(
        update={"providers": settings.providers.model_copy(update={"openai_api_key": SecretStr(SECRET)})}
    )
    try:
        async with running_worker(client, keyed):
            handle = await client.start_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=make_spec(), input="weather in Paris and Tokyo"),
                id=f"secret-{uuid.uuid4().hex[:8]}",
                task_queue=keyed.task_queue,
                result_type=AgentResult,
            )
            result = await handle.result()
            history = await handle.fetch_history()
    finally:
        tracing.shutdown_tracing()

    assert result.status == "completed"
    # The key was really used: the server accepts nothing without it.
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in scripted.requests)
    assert spans.get_finished_spans() and caplog.records  # there was something to scan
    scan = SecretScan(SECRET).history(history).requests(scripted.requests).text("worker logs", caplog.text)
    scan.metrics().spans(spans.get_finished_spans()).text("settings repr", repr(keyed))
    if keyed.state_dir.exists():
        scan.files("state dir", keyed.state_dir)
    scan.assert_clean()
