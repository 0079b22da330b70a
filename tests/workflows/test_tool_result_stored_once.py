"""Each tool result is in a run's history once: the ``tools.call`` result; the next ``llm.call`` names it."""

from __future__ import annotations

import uuid

import pytest
from agent_support import MODEL, make_spec
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import AgentInput, AgentResult, LLMConfig, LLMRequest, Message
from agentsteps.contracts.llm.tools import ToolCallInput
from agentsteps.contracts.names import AGENT_WORKFLOW, LLM_CALL_TOOL_CATALOG, TOOLS_CALL
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore
from agentsteps.worker import running_worker
from agentsteps.workflows.agent import AgentWorkflow

STEPS = 3
PADDING = "x" * 2000


class ReportQuery(BaseModel):
    n: int


def report_registry(marker: str) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool()
    def fetch_report(args: ReportQuery) -> dict:
        """A ~2 KB report whose text is unique to the call."""
        return {"report": f"{marker}-{args.n}-{PADDING}"}

    @registry.tool()
    def fetch_status(args: ReportQuery) -> dict:
        """A short answer: cheaper to copy than to name."""
        return {"status": "ok"}

    return registry


def script() -> dict:
    rules = [{"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "fetch_report", "arguments": {"n": 0}}]}}]
    rules += [
        {
            "match": {"role": "tool", "contains": f"-{n}-x"},
            "reply": {"tool_calls": [{"name": "fetch_report", "arguments": {"n": n + 1}}]},
        }
        for n in range(STEPS - 1)
    ]
    return {"rules": rules, "default": {"content": "done"}}


def occurrences(history, text: str) -> dict[str, int]:
    """Per event type, how often ``text`` is in the events' wire form (payload data is JSON, so verbatim)."""
    found: dict[str, int] = {}
    for event in history.events:
        n = event.SerializeToString().count(text.encode())
        if n:
            name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
            found[name] = found.get(name, 0) + n
    return found


@pytest.mark.parametrize("carried", [True, False], ids=["carried", "own_call"])
async def test_each_tool_result_is_in_history_once_and_the_model_still_reads_it(client, settings, scripted, carried):
    """``carried``: each report call carries the next model call (contracts/llm/next_call.py); else (a heartbeat
    timeout on tool calls, which a model call inside one would not beat) each model call is its own llm.call."""
    marker = f"REPORT-{uuid.uuid4().hex}"
    scripted.set_script(script())
    policy = {} if carried else {"tool_policy": ActivityPolicy(start_to_close_seconds=60, heartbeat_seconds=30)}
    async with running_worker(client, settings, registry=report_registry(marker)):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=["fetch_report"], max_steps=STEPS + 2, **policy), input="reports"),
            id=f"test-once-{uuid.uuid4().hex[:10]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        result = await handle.result()
        history = await handle.fetch_history()

    assert result.status == "completed" and len(result.steps) == STEPS + 1
    # The model read every result whole, in its last request.
    last = scripted.requests[-1].body["messages"]
    assert [m["role"] for m in last].count("tool") == STEPS
    for n in range(STEPS):
        text = f"{marker}-{n}-{PADDING}"
        assert any(text in (m.get("content") or "") for m in last), n
        # Once in what the run did: its tools.call result. Not in the next model call's input (carried: the
        # activity appended it; own call: it names the stored message); the run's own result (what the caller
        # receives, at the end) keeps its step records as always.
        where = occurrences(history, f"{marker}-{n}-")
        assert where.pop("ACTIVITY_TASK_COMPLETED") == 1, where
        assert where == {"WORKFLOW_EXECUTION_COMPLETED": 1}, where
    # Own calls after a tool step went to a name only workers that read stored messages register (here the
    # one for requests naming the run's tool catalog, whose workers read stored messages too).
    names = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert names.count(LLM_CALL_TOOL_CATALOG) == (0 if carried else STEPS)
    assert names.count(TOOLS_CALL) == STEPS
    await Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)


@pytest.fixture
async def llm_and_tools(tmp_path, scripted, settings):
    conversations = ConversationStore(PayloadStore(LocalDirStorageDriver(tmp_path)))
    tools = ToolActivities(report_registry("R"), conversations=conversations)
    async with provider_http_client(5.0) as http:
        yield LLMActivities(settings.providers, http, conversations=conversations), tools


def _request(owner: str, call_id: str, refs: dict) -> LLMRequest:
    call = Message(role="assistant", tool_calls=({"id": call_id, "name": "fetch_report", "arguments": '{"n": 1}'},))
    placeholder = Message(role="tool", tool_call_id=call_id, name="fetch_report")
    return LLMRequest(
        config=LLMConfig(model=MODEL, max_tokens=64, context_window=16_000),
        messages=[Message.system("s"), Message.user("u"), call, placeholder],
        chained=True,
        owner=owner,
        stored_messages=refs,
    )


async def test_a_stored_tool_message_for_another_call_or_another_run_fails_typed_and_is_not_retried(
    llm_and_tools, scripted
):
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    llm, tools = llm_and_tools
    stored = await tools.call(
        ToolCallInput(
            name="fetch_report",
            arguments='{"n": 1}',
            call_id="c1",
            idempotency_key="k",
            store_for="run-a/1",
            store_cap=20_000,
        )
    )
    assert stored.message_ref is not None and stored.message_ref.length == 1
    short = await tools.call(
        ToolCallInput(
            name="fetch_status",
            arguments='{"n": 1}',
            call_id="c0",
            idempotency_key="k0",
            store_for="run-a/1",
            store_cap=20_000,
        )
    )
    assert short.message_ref is None and short.content == '{"status": "ok"}'
    # The run it was stored for reads it in place of the placeholder.
    answer = await llm.call(_request("run-a/1", "c1", {3: stored.message_ref}))
    assert answer.message.content == "ok" and "R-1-" in str(scripted.requests[-1].body["messages"][-1])

    cases = {
        "another call": _request("run-a/1", "c2", {3: stored.message_ref}),
        "another run": _request("run-b/1", "c1", {3: stored.message_ref}),
        "not a tool message": _request("run-a/1", "c1", {1: stored.message_ref}),
        "out of range": _request("run-a/1", "c1", {9: stored.message_ref}),
    }
    for case, request in cases.items():
        with pytest.raises(ApplicationError) as refused:
            await llm.call(request)
        assert refused.value.type == "PayloadIntegrityError" and refused.value.non_retryable, case
