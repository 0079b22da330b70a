"""A failed turn leaves nothing running: its sibling calls are cancelled and their approvals withdrawn.

Before: when one call failed a turn, a sibling waiting for approval stayed in
the session's pending list, and ``approve`` later ran the tool with no turn
and no model to read its result.
"""

from __future__ import annotations

import asyncio

import pytest
from approval_support import approval_registry
from pydantic import BaseModel
from session_support import failure_of, rejected, session_id, turn
from temporalio.client import WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError

from agentsteps.client.sessions import decide_approval, pending_approvals, session_state
from agentsteps.contracts.errors import AgentStepsError, ApprovalError
from agentsteps.contracts.names import APPROVE_UPDATE, PROGRESS_TOPIC
from agentsteps.contracts.session import ProgressEvent
from agentsteps.worker import running_worker

SCRIPT = {
    "rules": [
        {
            "match": {"contains": "refund and audit"},
            "reply": {
                "tool_calls": [
                    {"name": "refund", "arguments": {"order": "A-17", "amount": 40.0}},
                    {"name": "audit", "arguments": {"order": "A-17"}},
                ]
            },
        },
        {"match": {"role": "user"}, "reply": {"content": "Hello again."}},
    ]
}


def program_reply(code: str) -> dict:
    return {"content": f"Here is the program.\n```python\n{code}```\n"}


# Code mode: the program runs both calls at once; the audit fails the turn while the refund waits.
CODE_SCRIPT = {
    "rules": [
        {
            "match": {"contains": "refund and audit"},
            "reply": program_reply(
                'import asyncio\nr = await asyncio.gather(refund(order="A-17", amount=40.0), audit(order="A-17"))\nr\n'
            ),
        },
        {"match": {"role": "user"}, "reply": program_reply("1 + 1\n")},
    ]
}


class AuditArgs(BaseModel):
    order: str


@pytest.fixture
def ran():
    return []


@pytest.fixture
async def desk(client, settings, ran):
    registry = approval_registry(ran)

    @registry.tool()
    def audit(args: AuditArgs) -> str:
        """Audit an order (its back end is broken: the call fails the turn)."""
        raise ApplicationError("the audit service refused the call", type="AuditDown", non_retryable=True)

    async with running_worker(client, settings, registry=registry):
        yield type("E", (), {"client": client, "task_queue": settings.task_queue})()


async def requested_approvals(client, sid: str) -> list[str]:
    """The approval ids the session's progress stream announced, up to the first turn's end."""
    found: list[str] = []
    stream = WorkflowStreamClient.create(client, sid)
    async for item in stream.subscribe([PROGRESS_TOPIC], from_offset=0, result_type=ProgressEvent):
        if item.data.kind == "approval_requested" and item.data.approval is not None:
            found.append(item.data.approval.approval_id)
        if item.data.kind == "turn_ended":
            return found
    return found


@pytest.mark.parametrize("mode", ["tools", "code"])
async def test_a_failing_call_withdraws_the_approval_its_sibling_waits_for(desk, scripted, ran, mode):
    scripted.set_script(SCRIPT if mode == "tools" else CODE_SCRIPT)
    spec = {"tools": ["refund", "audit"], **({"mode": "code", "max_steps": 4} if mode == "code" else {})}
    sid = session_id()
    with pytest.raises(WorkflowUpdateFailedError) as failed:  # a tool's own failure type, not one of ours
        await turn(desk, sid, "refund and audit A-17", **spec)
    state = await session_state(desk.client, sid)
    pending = await pending_approvals(desk.client, sid)
    [approval_id] = await asyncio.wait_for(requested_approvals(desk.client, sid), timeout=30)
    late = await rejected(desk.client, sid, APPROVE_UPDATE, {"approval_id": approval_id})
    with pytest.raises(ApprovalError) as via_client:
        await decide_approval(desk.client, sid, approval_id, approve=True, approver="ana")
    after = await turn(desk, sid, "hello", **spec)

    assert "audit service refused" in str(failure_of(failed.value))
    assert state.status == "idle" and state.turns == 1  # the session goes on
    assert pending == []
    assert late.type == "ApprovalError" and "withdrawn" in late.message and "did not run" in late.message
    assert "withdrawn" in str(failure_of(via_client.value))
    assert after.output in ("Hello again.", 2) and after.turn == 2
    assert ran == []  # the refund never ran
