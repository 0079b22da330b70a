"""Live progress: a session publishes its turns, steps, tool calls, approvals and usage on a durable stream."""

from __future__ import annotations

import asyncio

from approval_support import REFUND_SCRIPT, approval_worker
from session_support import session_id, turn
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from agentsteps.client.sessions import decide_approval
from agentsteps.contracts.names import PROGRESS_TOPIC
from agentsteps.contracts.session import ProgressEvent


async def test_a_follower_sees_each_step_tool_call_approval_usage_and_the_turns_end(client, settings, scripted):
    scripted.set_script(REFUND_SCRIPT)
    ran: list[str] = []
    sid = session_id()
    async with approval_worker(client, settings, ran):
        engine = type("E", (), {"client": client, "task_queue": settings.task_queue})()
        running = asyncio.ensure_future(turn(engine, sid, "refund A-17", tools=["refund"]))
        events: list[ProgressEvent] = []

        async def follow() -> None:
            stream = WorkflowStreamClient.create(client, sid)
            async for item in stream.subscribe([PROGRESS_TOPIC], result_type=ProgressEvent):
                events.append(item.data)
                if item.data.kind == "approval_requested":
                    assert item.data.approval is not None
                    await decide_approval(client, sid, item.data.approval.approval_id, approve=True, approver="ana")
                if item.data.kind == "turn_ended":
                    return

        await asyncio.sleep(0.3)  # the session exists before anyone follows it
        await asyncio.wait_for(follow(), timeout=60)
        result = await running

    kinds = [e.kind for e in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_ended"
    assert kinds.index("approval_requested") < kinds.index("approval_decided") < kinds.index("tool_call")
    assert [e.detail for e in events if e.kind == "step"] == ["tool_call", "final"]
    usage = [e.usage for e in events if e.kind == "usage"]
    assert usage[-1] == result.usage and usage[0].total_tokens < usage[-1].total_tokens
    assert events[-1].detail == "completed: Refunded 40." and len(ran) == 1
