"""Approvals in code mode: the program waits as a snapshot, holding no process, even across a SIGKILL."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from code_mode_support import NudgeLedger, code_worker, connect_with_store, worker_settings
from process_support import kill, start_worker_process
from test_code_mode_e2e import code_spec, program_reply

from agentsteps.client.sessions import decide_approval, pending_approvals
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW

WORKER = Path(__file__).parents[1] / "support" / "code_mode_support.py"
PROGRAM = 'r = await tickets_close(id=7)\n{"closed": r["id"], "first": r["first_time"]}\n'


async def _waiting(client, workflow_id: str):
    for _ in range(400):
        try:
            found = await pending_approvals(client, workflow_id)
        except Exception:  # not started yet, or the worker is being replaced
            found = []
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the program's call never waited for approval")


async def _start(client, settings):
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=code_spec(tools=["tickets.close"]), input="close ticket 7"),
        id=f"approve-{uuid.uuid4().hex[:8]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )


async def test_a_program_waits_for_approval_as_a_snapshot_holding_no_sandbox(temporal_env, scripted, tmp_path):
    scripted.set_script({"default": program_reply(PROGRAM)})
    settings = worker_settings(tmp_path / "state", f"ap-{uuid.uuid4().hex[:8]}", scripted.url_openai)
    client = await connect_with_store(temporal_env.client.service_client.config.target_host, settings)
    async with code_worker(client, settings) as (_, sandbox):
        handle = await _start(client, settings)
        waiting = await _waiting(client, handle.id)
        assert waiting.tool == "tickets.close" and waiting.arguments == '{"id": 7}'
        assert (
            sandbox.pool.checked_out == 0 and len(sandbox.pool.live) == 0
        )  # no interpreter held while a person decides
        # One snapshot before the long wait (beside the run's conversation segments), none per call.
        stored = [
            p
            for p in (settings.state_dir / "payloads").rglob("*")
            if p.is_file() and not p.name.startswith(".tmp-") and b'"prev":' not in p.read_bytes()
        ]
        assert len(stored) == 1
        await decide_approval(client, handle.id, waiting.approval_id, approve=True, approver="ana")
        result = await handle.result()
    assert result.output == {"closed": 7, "first": True}
    assert NudgeLedger(settings.state_dir / "nudges.db").nudged() == [7]


async def test_sigkill_while_a_program_waits_for_approval_loses_nothing_and_repeats_nothing(
    temporal_env, scripted, tmp_path
):
    scripted.set_script({"default": program_reply(PROGRAM)})
    state_dir = tmp_path / "state"
    settings = worker_settings(state_dir, f"apk-{uuid.uuid4().hex[:8]}", scripted.url_openai)
    address = temporal_env.client.service_client.config.target_host
    client = await connect_with_store(address, settings)
    first = start_worker_process(WORKER, address, settings.task_queue, scripted.url_openai, state_dir)
    try:
        handle = await _start(client, settings)
        waiting = await _waiting(client, handle.id)
        kill(first)
        second = start_worker_process(WORKER, address, settings.task_queue, scripted.url_openai, state_dir)
        try:
            # The new worker rebuilds the run from history; the call is still waiting, under the same id.
            again = await _waiting(client, handle.id)
            assert again.approval_id == waiting.approval_id
            await decide_approval(client, handle.id, waiting.approval_id, approve=True)
            result = await asyncio.wait_for(handle.result(), timeout=60)
        finally:
            kill(second)
    finally:
        kill(first)
    assert result.output == {"closed": 7, "first": True}
    ledger = NudgeLedger(state_dir / "nudges.db")
    assert ledger.nudged() == [7] and ledger.attempts() == 1
