"""A key rollout seen from a paused program: a pod without the key that signed its snapshot never fails it.

On a file of its own (beside ``test_scale_out_failures.py``) because it is one of the suite's longest tests:
``make test`` runs each file whole on one process, so it can start first beside the others.
"""

from __future__ import annotations

import asyncio

import pytest
from process_support import kill, wait_for
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures
from scale_helpers import code_spec, new_id, script, spawn, worker_settings
from scale_support import Ledger
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import connect

BOUND = 60.0  # seconds from the takeover to the typed failure


async def test_a_worker_without_the_signing_key_never_fails_the_paused_program_and_one_with_it_completes_it(
    temporal_env, scripted, tmp_path, s3_endpoint, s3_bucket
):
    """A key rollout seen from the run: the pod that takes the paused program over lacks the key id
    that signed it (a snapshot at every call: a program kept live or rebuilt by replay reads none). The
    run is not failed (counted as ``key_unknown``); a pod with the key finishes it."""
    scripted.set_script(script(delay=2.0))
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
    workers = [spawn(first, ledger_path, snapshot_every=1)]
    workflow_id = new_id("rollout")
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=code_spec(2.0), input="export"),
        id=workflow_id,
        task_queue=queue,
        result_type=AgentResult,
    )
    try:
        await wait_for(lambda: 2 in ledger.effects(workflow_id), timeout=90)
        kill(workers[0])
        workers.append(spawn(second, ledger_path, snapshot_every=1))
        await asyncio.sleep(BOUND / 2)  # the foreign pod retries; formerly the run failed well within this
        description = await handle.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            with pytest.raises(WorkflowFailureError) as ended:
                await handle.result()
            events = [e.event_type for e in (await handle.fetch_history()).events]
            raise AssertionError(f"the pod without the key ended the run: {ended.value.cause!r} {events}")
        kill(workers[1])
        workers.append(spawn(third, ledger_path, snapshot_every=1))
        result = await asyncio.wait_for(handle.result(), timeout=240)
    finally:
        for worker in workers:
            kill(worker)
    assert result.status == "completed"
    assert sorted(ledger.effects(workflow_id)) == list(range(1, len(ledger.effects(workflow_id)) + 1))
