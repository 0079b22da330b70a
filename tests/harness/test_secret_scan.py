"""The secret scanner sees what it claims to: a secret planted in each place it reads is found there.

The old check, ``secret not in history.to_json()``, passes on a history whose
payloads carry the secret; the scanner must not.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import Counter
from secret_scan import SecretScan
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentsteps.contracts.config.settings import TracingSettings
from agentsteps.telemetry import tracing
from agentsteps.telemetry.metrics import REGISTRY
from agentsteps.telemetry.tracing import configure_tracing, tool_span

SECRET = "sk-planted-" + uuid.uuid4().hex


@workflow.defn(name="LeakyProbe")
class LeakyProbe:
    """Carries its input into a memo, a search-attribute-free result and a failure's details."""

    @workflow.run
    async def run(self, secret: str) -> str:
        workflow.upsert_memo({"note": secret})
        await workflow.sleep(timedelta(milliseconds=1))
        raise ApplicationError("failed", {"carried": secret}, non_retryable=True)


async def _leaky_history(client):
    task_queue = f"leak-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[LeakyProbe], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow(
            LeakyProbe.run, SECRET, id=f"leak-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        return await handle.fetch_history()


async def test_a_secret_inside_history_payloads_is_found_where_to_json_is_blind(client):
    history = await _leaky_history(client)

    assert SECRET not in history.to_json()  # the old check would have passed this history
    leaks = SecretScan(SECRET).history(history).leaks()
    assert leaks == [f"{SECRET[:6]}… in history (decoded payloads)"]


def test_a_secret_in_a_metric_label_is_found_on_the_exposition():
    leaky = Counter(
        f"leak_probe_{uuid.uuid4().hex[:6]}", "A label that should never hold a secret.", ["who"], registry=REGISTRY
    )
    assert not SecretScan(SECRET).metrics().leaks()
    leaky.labels(who=SECRET).inc()
    try:
        assert SecretScan(SECRET).metrics().leaks() == [f"{SECRET[:6]}… in /metrics exposition"]
    finally:
        REGISTRY.unregister(leaky)


def test_a_secret_in_span_attributes_is_found():
    exporter = InMemorySpanExporter()
    configure_tracing(TracingSettings(capture_content=True), exporter=exporter)
    try:
        with tool_span("lookup", call_id="c1", tool_type="function") as span:
            span.record_arguments(f'{{"token": "{SECRET}"}}')
    finally:
        tracing.shutdown_tracing()
    assert SecretScan(SECRET).spans(exporter.get_finished_spans()).leaks() == [f"{SECRET[:6]}… in span attributes"]


def test_files_are_read_as_raw_bytes(tmp_path):
    (tmp_path / "payloads" / "ab").mkdir(parents=True)
    (tmp_path / "payloads" / "ab" / "blob").write_bytes(b"\x00\x01" + SECRET.encode() + b"\xff")
    (tmp_path / "clean").write_bytes(b"nothing here")
    assert SecretScan(SECRET).files("state dir", tmp_path).leaks() == [f"{SECRET[:6]}… in state dir: blob"]
