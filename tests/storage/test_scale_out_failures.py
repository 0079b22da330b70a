"""Workers that cannot read each other's payloads or snapshots: a typed failure in bounded time, never a hang."""

from __future__ import annotations

import asyncio
import time

import pytest
from process_support import STICKY_AFTER_KILL, kill, wait_for
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures
from scale_helpers import new_id, script, spawn, tool_spec, worker_settings
from scale_support import Ledger
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, TerminatedError

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import connect

BOUND = 60.0  # seconds from the takeover to the typed failure
DELAY = 1.0
"""Seconds each export takes: the second is still running when its worker is killed (the first export
waits for it), and the retried one on the worker taking over is cut at DELAY + 4 s."""


def _typed_failure(exc: BaseException) -> tuple[str, str]:
    """(type, message) of a run's end: a failure with a typed ApplicationError, or a termination
    whose reason is ``Type: message`` (a worker that met the missing payload while replaying)."""
    cause = exc
    while cause is not None and not isinstance(cause, ApplicationError | TerminatedError):
        cause = cause.__cause__
    if isinstance(cause, ApplicationError):
        assert cause.non_retryable
        return cause.type or "", cause.message
    assert isinstance(cause, TerminatedError), f"expected a typed failure, got {exc!r}"
    kind, _, message = cause.message.partition(": ")
    return kind, message


async def _takeover_fails_typed(
    temporal_env, scripted, tmp_path, spec, *, first: str, second: str, between=None
) -> tuple[tuple[str, str], float]:
    """Run on worker ``first`` until its second call is in flight, kill it, let ``second`` take over."""
    ledger_path = tmp_path / "ledger.db"
    ledger = Ledger(ledger_path)
    client = await connect(WorkerSettings.model_validate_json(first))
    worker = spawn(first, ledger_path, env=STICKY_AFTER_KILL)
    workflow_id = new_id("takeover")
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="export"),
        id=workflow_id,
        task_queue=WorkerSettings.model_validate_json(first).task_queue,
        result_type=AgentResult,
    )
    replacement = None
    try:
        await wait_for(lambda: 2 in ledger.effects(workflow_id), timeout=90)
        kill(worker)
        if between is not None:
            between()
        replacement = spawn(second, ledger_path, env=STICKY_AFTER_KILL)
        started = time.monotonic()
        with pytest.raises(WorkflowFailureError) as caught:
            await asyncio.wait_for(handle.result(), timeout=BOUND)
        return _typed_failure(caught.value), time.monotonic() - started
    finally:
        kill(worker)
        if replacement is not None:
            kill(replacement)


async def test_separate_local_stores_fail_typed_naming_digest_and_store(temporal_env, scripted, tmp_path):
    scripted.set_script(script(delay=DELAY))
    address = temporal_env.client.service_client.config.target_host
    queue = new_id("stores")
    # An operator error: "single worker" declared, but two run with separate disks.
    first = worker_settings(address, queue, scripted.url_openai, tmp_path / "a", single_worker=True)
    second = worker_settings(address, queue, scripted.url_openai, tmp_path / "b", single_worker=True)
    (kind, message), took = await _takeover_fails_typed(
        temporal_env, scripted, tmp_path, tool_spec(DELAY), first=first, second=second
    )
    assert kind == "PayloadMissingError"
    assert str(tmp_path / "b" / "payloads") in message and "sha256:" in message
    assert took < BOUND


async def test_a_payload_gone_from_s3_fails_typed(temporal_env, scripted, tmp_path, s3_endpoint, s3_bucket):
    scripted.set_script(script(delay=DELAY))
    address = temporal_env.client.service_client.config.target_host
    queue = new_id("s3gone")
    s3 = store_settings(s3_endpoint, s3_bucket)
    first = worker_settings(address, queue, scripted.url_openai, tmp_path / "a", s3=s3)
    second = worker_settings(address, queue, scripted.url_openai, tmp_path / "b", s3=s3)

    def empty_the_bucket() -> None:
        bucket = s3_client(s3_endpoint)
        for obj in bucket.list_objects_v2(Bucket=s3_bucket).get("Contents", []):
            bucket.delete_object(Bucket=s3_bucket, Key=obj["Key"])

    (kind, message), _ = await _takeover_fails_typed(
        temporal_env, scripted, tmp_path, tool_spec(DELAY), first=first, second=second, between=empty_the_bucket
    )
    assert kind == "PayloadMissingError" and f"s3://{s3_bucket}/" in message
