"""Decisions made in the window before a continue-as-new are carried into the next run.

The session continues as new in the workflow task that ends a turn. Here
that turn's two approval decisions (one approve, one reject) land together
in one workflow task while no worker polls, the turn ends from there, and the
session continues as new at once (history is brought near
``continue_after_events`` first, so that turn is the one that crosses it).
A late second decision on either id must still be told who decided it
("already approved by ana"), not "no call is waiting", in the continued run
and after its next turn.

Checked against the code before: with the decided records left out of the
carry this fails on the first late decision. Taking the carry just before
``stream.continue_as_new`` (as before ``bcc11d0``) passes too: the session
waits for every handler to finish before it takes it, and this SDK applies
every Update of a workflow task before it checks any condition, so no
decision can be accepted between that wait and the continue-as-new. Building
the carry inside ``continue_as_new``'s callback keeps that true without
relying on it.
"""

from __future__ import annotations

import asyncio

from approval_support import approval_worker
from session_support import rejected, session_id, turn
from temporalio.service import RPCError

from agentsteps.client.sessions import decide_approval, pending_approvals, session_state
from agentsteps.contracts.names import APPROVE_UPDATE, REJECT_UPDATE
from agentsteps.contracts.session import SessionConfig

SCRIPT = {
    "rules": [
        {
            "match": {"contains": "refund both"},
            "reply": {
                "tool_calls": [
                    {"name": "refund", "arguments": {"order": "A-1", "amount": 10.0}},
                    {"name": "refund", "arguments": {"order": "A-2", "amount": 20.0}},
                ]
            },
        },
        {"match": {"tool_result_for": "refund"}, "reply": {"content": "One refunded, one refused."}},
        {"match": {"role": "user"}, "reply": {"content": "noted"}},
    ]
}


async def _waiting(client, sid: str, count: int) -> list:
    for _ in range(400):
        try:
            found = await pending_approvals(client, sid)
        except RPCError:  # not started yet
            found = []
        if len(found) == count:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} calls waiting for approval")


async def test_decisions_of_the_turn_that_continues_as_new_are_carried(client, settings, scripted):
    scripted.set_script(SCRIPT)
    engine = type("E", (), {"client": client, "task_queue": settings.task_queue})()
    sid = session_id()
    config = SessionConfig(continue_after_events=100)
    ran: list[str] = []
    async with approval_worker(client, settings, ran):
        await turn(engine, sid, "note 1", tools=["refund"], config=config)
        warm_up = 1
        while (
            await client.get_workflow_handle(sid).describe()
        ).raw_description.workflow_execution_info.history_length < 70:
            warm_up += 1  # short turns until the refunds' turn (40-odd events) is the one that crosses 100
            await turn(engine, sid, f"note {warm_up}", tools=["refund"], config=config)
        assert (await session_state(client, sid)).continued == 0
        running = asyncio.ensure_future(turn(engine, sid, "refund both", tools=["refund"], config=config))
        first, second = sorted(await _waiting(client, sid, 2), key=lambda p: p.arguments)
    # No worker: both decisions wait at the server and reach the next worker in one workflow task, the
    # turn ends from there, and that same turn's end is where the session continues as new.
    decisions = asyncio.gather(
        decide_approval(client, sid, first.approval_id, approve=True, approver="ana"),
        decide_approval(client, sid, second.approval_id, approve=False, approver="bo", note="too much"),
    )
    await asyncio.sleep(1)
    async with approval_worker(client, settings, ran):
        approved, refused = await asyncio.wait_for(decisions, timeout=60)
        result = await asyncio.wait_for(running, timeout=60)
        state = await session_state(client, sid)
        late_first = await rejected(client, sid, REJECT_UPDATE, {"approval_id": first.approval_id})
        late_second = await rejected(client, sid, APPROVE_UPDATE, {"approval_id": second.approval_id})
        # The continued run goes on: a next turn, and the decisions still known after it.
        await turn(engine, sid, "anything else?", tools=["refund"], config=config)
        later = await rejected(client, sid, APPROVE_UPDATE, {"approval_id": first.approval_id})
        assert (await session_state(client, sid)).continued == 1

    assert (approved.outcome, refused.outcome) == ("approved", "rejected")
    assert result.output == "One refunded, one refused." and len(ran) == 1
    assert state.continued == 1 and state.turns == warm_up + 1
    assert late_first.type == "ApprovalError" and "already approved by ana" in late_first.message
    assert late_second.type == "ApprovalError" and "already rejected by bo" in late_second.message
    assert later.type == "ApprovalError" and "already approved by ana" in later.message
