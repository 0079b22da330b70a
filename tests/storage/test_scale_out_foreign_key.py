"""A key rollout seen from a paused program: a pod without the key that signed its snapshot never fails it.

On a file of its own (beside ``test_scale_out_failures.py``) because it is one of the suite's longest tests:
``make test`` runs each file whole on one process, so it can start first beside the others.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from process_support import STICKY_AFTER_KILL, kill, wait_for
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures
from scale_helpers import code_spec, new_id, script, spawn, worker_settings
from scale_support import Ledger
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import connect

DELAY = 1.0
"""Seconds each export takes: the second is still running when its worker is killed (the first export
waits for it), and the retried one on the worker taking over is cut at DELAY + 4 s."""
KEY_WAIT = 5.0
"""Seconds the run waits before it asks again for a snapshot signed with a key id its worker lacks (30 s,
then longer, in production: ``program_driver.KEY_WAITS``). Only how long the wait is differs: the worker
without the key is stopped while the run waits, so the first ask after it goes to the worker with the key."""


async def _waiting_for_the_key(handle: WorkflowHandle) -> None:
    """Until the run waits to ask again for its snapshot (the wait's timer started); fails if it ended instead."""
    deadline = time.monotonic() + 120
    while True:
        history = await handle.fetch_history()
        if any(
            e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
            and e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta() == timedelta(seconds=KEY_WAIT)
            for e in history.events
        ):
            return
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            with pytest.raises(WorkflowFailureError) as ended:
                await handle.result()
            events = [e.event_type for e in history.events]
            raise AssertionError(f"the pod without the key ended the run: {ended.value.cause!r} {events}")
        assert time.monotonic() < deadline, "the run never waited for a worker with the key"
        await asyncio.sleep(0.5)


async def test_a_worker_without_the_signing_key_never_fails_the_paused_program_and_one_with_it_completes_it(
    temporal_env, scripted, tmp_path, s3_endpoint, s3_bucket
):
    """A key rollout seen from the run: the pod that takes the paused program over lacks the key id
    that signed it (a snapshot at every call: a program kept live or rebuilt by replay reads none). The
    run is not failed (counted as ``key_unknown``); a pod with the key finishes it."""
    scripted.set_script(script(delay=DELAY))
    address = temporal_env.client.service_client.config.target_host
    queue = new_id("foreignkey")
    s3 = store_settings(s3_endpoint, s3_bucket)
    first = worker_settings(address, queue, scripted.url_openai, tmp_path / "a", s3=s3)
    second = worker_settings(
        address, queue, scripted.url_openai, tmp_path / "b", s3=s3, key="another-deployments-key-0123456789"
    )
    third = worker_settings(address, queue, scripted.url_openai, tmp_path / "c", s3=s3)
    ledger_path = tmp_path / "ledger.db"
    ledger = Ledger(ledger_path)
    client = await connect(WorkerSettings.model_validate_json(first))
    workers = [spawn(first, ledger_path, snapshot_every=1, key_wait=KEY_WAIT, env=STICKY_AFTER_KILL)]
    workflow_id = new_id("rollout")
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=code_spec(DELAY), input="export"),
        id=workflow_id,
        task_queue=queue,
        result_type=AgentResult,
    )
    try:
        await wait_for(lambda: 2 in ledger.effects(workflow_id), timeout=90)
        kill(workers[0])
        workers.append(spawn(second, ledger_path, snapshot_every=1, key_wait=KEY_WAIT, env=STICKY_AFTER_KILL))
        # The foreign pod meets the snapshot, retries, then the run waits to ask again (formerly it failed here).
        await _waiting_for_the_key(handle)
        kill(workers[1])
        workers.append(spawn(third, ledger_path, snapshot_every=1, key_wait=KEY_WAIT, env=STICKY_AFTER_KILL))
        result = await asyncio.wait_for(handle.result(), timeout=240)
    finally:
        for worker in workers:
            kill(worker)
    assert result.status == "completed"
    assert sorted(ledger.effects(workflow_id)) == list(range(1, len(ledger.effects(workflow_id)) + 1))
