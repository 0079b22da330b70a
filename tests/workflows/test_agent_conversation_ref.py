"""AgentWorkflow sends its conversation by reference: each llm.call carries the new messages only."""

from __future__ import annotations

import asyncio
import shutil
import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from agentsteps.contracts import AgentInput, AgentResult, LLMConfig
from agentsteps.contracts.names import AGENT_WORKFLOW, APPROVE_UPDATE, CONVERSATION_REF_PATCH
from agentsteps.workflows.agent import AgentWorkflow

from agent_support import make_spec
from approval_support import REFUND_SCRIPT, approval_worker
from test_approvals import decide, wait_pending
from test_session_history import _llm_input_sizes

STEPS = 30


def _marked(history, patch_id: str) -> bool:
    return any(
        patch_id.encode() in e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    )


async def test_each_step_adds_its_new_messages_to_history_never_the_conversation(engine, scripted):
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    scripted.set_script({
        "rules": [
            {"match": {"role": "user"}, "reply": call},
            {"match": {"tool_result_for": "get_weather"}, "times": STEPS - 1, "reply": call},
        ],
        "default": {"content": "done"},
    })
    spec = make_spec(
        tools=["get_weather"], max_steps=STEPS + 1,
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=128_000),
    )
    handle = await engine.client.start_workflow(
        AGENT_WORKFLOW, AgentInput(spec=spec, input="weather"), id=f"test-ref-{uuid.uuid4().hex[:10]}",
        task_queue=engine.task_queue, result_type=AgentResult,
    )
    result = await handle.result()
    history = await handle.fetch_history()

    assert result.status == "completed" and len(result.steps) == STEPS + 1
    # The model still got the whole conversation: system, user, then a call and its result per step.
    assert len(scripted.requests[-1].body["messages"]) == 2 + 2 * STEPS
    sizes = _llm_input_sizes(history)
    assert len(sizes) == STEPS + 1
    # With the whole history each input would grow by a step's messages every step (~30x here).
    assert max(sizes[2:]) <= 1.2 * sizes[1], sizes
    assert _marked(history, CONVERSATION_REF_PATCH)
    await Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)


async def test_a_run_whose_stored_conversation_is_gone_fails_typed_naming_digest_and_store(client, settings, scripted):
    """A worker without the segments (its cache empty, the store wiped) fails the run, never retries."""
    scripted.set_script(REFUND_SCRIPT)
    ran: list[str] = []
    workflow_id = f"test-ref-gone-{uuid.uuid4().hex[:8]}"
    async with approval_worker(client, settings, ran):
        handle = await client.start_workflow(
            AGENT_WORKFLOW, AgentInput(spec=make_spec(tools=["refund"]), input="refund A-17"),
            id=workflow_id, task_queue=settings.task_queue, result_type=AgentResult,
        )
        waiting = await wait_pending(client, workflow_id)
    store = settings.state_dir / "payloads"
    assert any(store.rglob("*")), "the first step stored its conversation segment"
    shutil.rmtree(store)
    async with approval_worker(client, settings, ran):
        await decide(client, workflow_id, APPROVE_UPDATE, waiting.approval_id)
        try:
            await asyncio.wait_for(handle.result(), timeout=60)
        except WorkflowFailureError as exc:
            cause = exc.cause
            while cause is not None and not isinstance(cause, ApplicationError):
                cause = cause.__cause__
        else:
            raise AssertionError("the run was expected to fail")
    assert isinstance(cause, ApplicationError) and cause.non_retryable
    assert cause.type == "PayloadMissingError"
    assert "stored conversation" in cause.message and "sha256:" in cause.message and str(store) in cause.message
    assert len(ran) == 1  # the approved refund ran once; the model call after it is what failed
