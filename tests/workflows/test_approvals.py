"""Human approval of tools: pause, query, approve / reject / time out, misuse errors."""

from __future__ import annotations

import asyncio

import pytest
from agent_support import make_spec
from approval_support import REFUND_SCRIPT, approval_worker
from session_support import rejected, session_id, turn
from temporalio.service import RPCError

from agentsteps.client.sessions import close_session, decide_approval, session_handle, session_state
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.approvals import ApprovalRecord, PendingApproval
from agentsteps.contracts.errors import SessionClosedError
from agentsteps.contracts.names import AGENT_WORKFLOW, APPROVALS_QUERY, APPROVE_UPDATE, REJECT_UPDATE
from agentsteps.contracts.session import SessionConfig


async def pending(client, sid: str) -> list[PendingApproval]:
    return await client.get_workflow_handle(sid).query(APPROVALS_QUERY, result_type=list[PendingApproval])


async def wait_pending(client, sid: str) -> PendingApproval:
    for _ in range(200):
        try:
            waiting = await pending(client, sid)
        except RPCError:  # the session is not started yet
            waiting = []
        if waiting:
            return waiting[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no call started waiting for approval")


async def decide(client, sid: str, name: str, approval_id: str, **extra) -> ApprovalRecord:
    return await client.get_workflow_handle(sid).execute_update(
        name, {"approval_id": approval_id, **extra}, result_type=ApprovalRecord
    )


@pytest.fixture
def ran():
    return []


@pytest.fixture
async def approving(client, settings, ran):
    async with approval_worker(client, settings, ran):
        yield type("E", (), {"client": client, "task_queue": settings.task_queue})()


async def test_a_call_waits_for_approval_and_runs_once_when_approved(approving, scripted, ran):
    scripted.set_script(REFUND_SCRIPT)
    sid = session_id()
    running = asyncio.ensure_future(turn(approving, sid, "refund A-17", tools=["refund"]))

    waiting = await wait_pending(approving.client, sid)
    assert (waiting.tool, waiting.arguments) == ("refund", '{"order": "A-17", "amount": 40.0}')
    assert "requires a person's approval" in waiting.reason and "side effects" in waiting.reason
    assert ran == []  # nothing ran before the decision
    record = await decide(approving.client, sid, APPROVE_UPDATE, waiting.approval_id, approver="ana", note="ok")
    result = await running

    assert (record.outcome, record.approver, record.note) == ("approved", "ana", "ok")
    assert result.output == "Refunded 40." and len(ran) == 1
    assert await pending(approving.client, sid) == []


async def test_a_rejection_reaches_the_model_as_the_tools_error(approving, scripted, ran):
    scripted.set_script(REFUND_SCRIPT)
    sid = session_id()
    running = asyncio.ensure_future(turn(approving, sid, "refund A-17", tools=["refund"]))
    waiting = await wait_pending(approving.client, sid)

    await decide(approving.client, sid, REJECT_UPDATE, waiting.approval_id, approver="bob", note="over the limit")
    result = await running

    assert result.output == "The refund was refused." and ran == []
    [call] = result.steps[0].tool_calls
    assert call.is_error and "rejected by bob: over the limit" in call.content


async def test_no_decision_within_the_approval_timeout_rejects_the_call(approving, scripted, ran):
    scripted.set_script(REFUND_SCRIPT)
    sid = session_id()
    result = await turn(approving, sid, "refund A-17", tools=["refund"], approval_timeout_seconds=1)
    assert result.output == "Nobody approved it." and ran == []
    assert "not approved in time" in result.steps[0].tool_calls[0].content


async def test_approval_misuse_gets_clear_errors(approving, scripted, ran):
    scripted.set_script(REFUND_SCRIPT)
    sid = session_id()
    running = asyncio.ensure_future(turn(approving, sid, "refund A-17", tools=["refund"]))
    waiting = await wait_pending(approving.client, sid)

    unknown = await rejected(approving.client, sid, APPROVE_UPDATE, {"approval_id": "nope"})
    malformed = await rejected(approving.client, sid, APPROVE_UPDATE, {"id": waiting.approval_id})
    await decide(approving.client, sid, APPROVE_UPDATE, waiting.approval_id, approver="ana")
    twice = await rejected(approving.client, sid, REJECT_UPDATE, {"approval_id": waiting.approval_id})
    await running
    await close_session(approving.client, sid)
    await session_handle(approving.client, sid).result()

    assert unknown.type == "ApprovalError" and "no call is waiting" in unknown.message
    assert waiting.approval_id in unknown.message
    assert malformed.type == "ApprovalError" and "$.approval_id: Field required" in malformed.message
    assert twice.type == "ApprovalError" and "already approved by ana" in twice.message
    assert len(ran) == 1
    with pytest.raises(SessionClosedError, match="has ended"):
        await decide_approval(approving.client, sid, waiting.approval_id, approve=True)


async def test_a_decision_is_still_remembered_after_the_session_continues_as_new(approving, scripted, ran):
    scripted.set_script(REFUND_SCRIPT)
    sid = session_id()
    config = SessionConfig(continue_after_events=100)
    running = asyncio.ensure_future(turn(approving, sid, "refund A-17", tools=["refund"], config=config))
    waiting = await wait_pending(approving.client, sid)
    await decide(approving.client, sid, APPROVE_UPDATE, waiting.approval_id, approver="ana")
    await running
    scripted.set_script({"default": {"content": "noted"}})
    for n in range(40):  # short turns until history passes 100 events and the session continues as new
        await turn(approving, sid, f"note {n}", tools=["refund"], config=config)
        if (await session_state(approving.client, sid)).continued:
            break
    assert (await session_state(approving.client, sid)).continued >= 1

    late = await rejected(approving.client, sid, REJECT_UPDATE, {"approval_id": waiting.approval_id})
    assert late.type == "ApprovalError" and "already approved by ana" in late.message
    assert len(ran) == 1


async def test_a_one_shot_agent_run_waits_for_approval_too(approving, scripted, ran):
    scripted.set_script(REFUND_SCRIPT)
    handle = await approving.client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=make_spec(tools=["refund"]), input="refund A-17"),
        id=session_id(),
        task_queue=approving.task_queue,
        result_type=AgentResult,
    )
    waiting = await wait_pending(approving.client, handle.id)
    await decide(approving.client, handle.id, APPROVE_UPDATE, waiting.approval_id)
    assert (await handle.result()).output == "Refunded 40." and len(ran) == 1


def test_mcp_tools_named_in_require_approval_are_marked_and_a_bad_setting_is_refused():
    import mcp_types as types
    from pydantic import ValidationError

    from agentsteps.activities.mcp.results import to_tool_schema
    from agentsteps.contracts.config.mcp_config import McpConfig

    config = McpConfig.model_validate(
        {
            "servers": {
                "tracker": {
                    "transport": "http",
                    "url": "http://x/mcp",
                    "tool_prefix": "t_",
                    "require_approval": ["close_issue"],
                }
            }
        }
    )
    server = config.servers["tracker"]
    tool = types.Tool(name="close_issue", input_schema={"type": "object", "properties": {}})
    other = types.Tool(name="list_issues", input_schema={"type": "object", "properties": {}})
    assert to_tool_schema("tracker", "t_", tool, require_approval=server.require_approval).requires_approval
    assert not to_tool_schema("tracker", "t_", other, require_approval=server.require_approval).requires_approval
    with pytest.raises(ValidationError, match="require_approval"):
        McpConfig.model_validate(
            {"servers": {"tracker": {"transport": "http", "url": "http://x/mcp", "require_approval": "close_issue"}}}
        )
