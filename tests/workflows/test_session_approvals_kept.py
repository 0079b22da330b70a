"""No approval decision is ever lost: 250 decisions landing in one workflow task all reach their calls.

Before: the desk kept only its latest 200 decisions, evicting the oldest as
each new one came in, so when more than 200 landed in one workflow task
(before any waiting call woke) the first ones were gone, and their calls sat
until the approval timeout rejected them as ``timed_out``.

The next worker gets all 250 decisions in one activation, and the SDK fails an
activation that takes over 2 s of wall time ("potential deadlock"). That
activation costs this process 50-100 ms of CPU; what once took it past 2 s on
a loaded CI machine was a full garbage collection landing inside it: this
process's heap (the provider SDKs' models that ``agentsteps.worker`` imports,
over 300,000 objects) takes 300-400 ms to scan here. The product's worker
freezes that heap once it has started (``settle_heap``), so its collections
never scan it; this process cannot keep it frozen (it builds worker after
worker), so it freezes it only while that worker runs.
"""

from __future__ import annotations

import asyncio
import gc
import uuid

from approval_support import approval_worker
from session_support import turn
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.client.sessions import decide_approval, pending_approvals
from agentsteps.contracts.approvals import ApprovalRecord

CALLS = 250


async def test_250_decisions_in_one_workflow_task_all_reach_their_calls(scripted, settings):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "tool_calls": [
                            {"name": "refund", "arguments": {"order": f"A-{n}", "amount": 1.0}} for n in range(CALLS)
                        ]
                    },
                },
                {"match": {"tool_result_for": "refund"}, "reply": {"content": "Refunded them all."}},
            ]
        }
    )
    # A person approving a batch: the server must admit that many Updates at once (its default is 10).
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        data_converter=pydantic_data_converter,
        dev_server_extra_args=[*dev_server_args(), "--dynamic-config-value", "history.maxInFlightUpdates=1000"],
        dev_server_log_level="error",
    )
    client = env.client
    engine = type("E", (), {"client": client, "task_queue": settings.task_queue})()
    sid = f"batch-{uuid.uuid4().hex[:8]}"
    ran: list[str] = []
    try:
        async with approval_worker(client, settings, ran):
            running = asyncio.ensure_future(
                turn(engine, sid, "refund everything", tools=["refund"], approval_timeout_seconds=30)
            )
            for _ in range(600):
                waiting = await _pending(client, sid)
                if len(waiting) == CALLS:
                    break
                await asyncio.sleep(0.05)
            assert len(waiting) == CALLS
        # No worker now: every decision waits at the server, then all reach the next worker in one task.
        decisions = [
            asyncio.ensure_future(decide_approval(client, sid, w.approval_id, approve=True, approver="ana"))
            for w in waiting
        ]
        await asyncio.sleep(2)
        gc.collect()  # garbage (the first worker's evicted run) is freed, not frozen
        gc.freeze()  # as ``settle_heap`` does in the product's worker process
        try:
            async with approval_worker(client, settings, ran):
                records: list[ApprovalRecord] = await asyncio.wait_for(asyncio.gather(*decisions), timeout=120)
                result = await asyncio.wait_for(running, timeout=120)
        finally:
            gc.unfreeze()
    finally:
        await env.shutdown()

    assert {r.outcome for r in records} == {"approved"}
    outcomes = [c.content for c in result.steps[0].tool_calls]
    assert len(outcomes) == CALLS and not [c for c in outcomes if "not approved in time" in c]
    assert len(ran) == CALLS and result.output == "Refunded them all."


async def _pending(client, sid: str):
    try:
        return await pending_approvals(client, sid)
    except Exception:  # the session is not started yet
        return []
