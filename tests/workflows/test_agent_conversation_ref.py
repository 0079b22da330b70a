"""AgentWorkflow sends its conversation by reference: each llm.call carries the new messages only."""

from __future__ import annotations

import asyncio
import shutil
import uuid

from agent_support import make_spec, weather_then_answer
from approval_support import REFUND_SCRIPT, approval_worker
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker
from test_approvals import decide, wait_pending
from test_session_history import _llm_input_sizes

from agentsteps.activities.quotas import QuotaPlanActivities
from agentsteps.contracts import AgentInput, AgentResult, LLMConfig, LLMRequest, LLMResponse, Message
from agentsteps.contracts.names import (
    AGENT_WORKFLOW,
    APPROVE_UPDATE,
    LLM_CALL,
    LLM_CALL_PLAN_FIRST,
    QUOTA_FROM_WORKER_PATCH,
    RELEASE_2026_12_06_PATCH,
)
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.workflows.agent import AgentWorkflow

STEPS = 30


def _marked(history, patch_id: str) -> bool:
    return any(
        patch_id.encode() in e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    )


async def test_each_step_adds_its_new_messages_to_history_never_the_conversation(engine, scripted):
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    scripted.set_script(
        {
            "rules": [
                {"match": {"role": "user"}, "reply": call},
                {"match": {"tool_result_for": "get_weather"}, "times": STEPS - 1, "reply": call},
            ],
            "default": {"content": "done"},
        }
    )
    spec = make_spec(
        tools=["get_weather"],
        max_steps=STEPS + 1,
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=128_000),
    )
    handle = await engine.client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="weather"),
        id=f"test-ref-{uuid.uuid4().hex[:10]}",
        task_queue=engine.task_queue,
        result_type=AgentResult,
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
    # Every patched behaviour since 0.2.0 under one release marker (the worker's quota plan rides on the first
    # model call, no local activity): one marker and one patch upsert a run (billable actions).
    assert _marked(history, RELEASE_2026_12_06_PATCH)
    assert not _marked(history, QUOTA_FROM_WORKER_PATCH)  # and no 0.2.0 marker: one marker in all, below
    kinds = [e.event_type for e in history.events]
    assert kinds.count(EventType.EVENT_TYPE_MARKER_RECORDED) == 1
    # The marker's TemporalChangeVersion, then the console's attributes at start (this start set none);
    # none at the end: the run completed, and its result has the totals.
    assert kinds.count(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES) == 2
    # No tools.describe: the first llm.call resolved the tool names; then one activity a step, each weather
    # lookup carrying the next model call (contracts/llm/next_call.py).
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == [LLM_CALL_PLAN_FIRST] + ["tools.call"] * STEPS
    assert result.catalog_digest.startswith("sha256:")
    await Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)


async def test_a_run_whose_stored_conversation_is_gone_fails_typed_naming_digest_and_store(client, settings, scripted):
    """A worker without the segments (its cache empty, the store wiped) fails the run, never retries."""
    scripted.set_script(REFUND_SCRIPT)
    ran: list[str] = []
    workflow_id = f"test-ref-gone-{uuid.uuid4().hex[:8]}"
    async with approval_worker(client, settings, ran):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=["refund"]), input="refund A-17"),
            id=workflow_id,
            task_queue=settings.task_queue,
            result_type=AgentResult,
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
    # The run's tool catalog is read first (it is gone with the segments): either names what is missing.
    assert "stored conversation" in cause.message or "stored tool catalog" in cause.message, cause.message
    assert "sha256:" in cause.message and str(store) in cause.message
    assert len(ran) == 1  # the approved refund ran once; the model call after it is what failed


older_calls: list[LLMRequest] = []


@activity.defn(name=LLM_CALL)
async def older_llm_call(request: LLMRequest) -> LLMResponse:
    """An llm.call from before tool_names: it would ignore them and answer without tools."""
    older_calls.append(request)
    return LLMResponse(message=Message(role="assistant", content="no tools needed"), model=request.config.model)


async def _resolving_call_attempts(handle) -> int:
    description = await handle.describe()
    return max(
        (
            a.attempt
            for a in description.raw_description.pending_activities
            if a.activity_type.name == LLM_CALL_PLAN_FIRST
        ),
        default=0,
    )


async def test_an_older_worker_never_takes_the_call_that_resolves_tools_and_the_run_completes(
    client, settings, scripted
):
    """A rolling upgrade in either order: the first call waits for an upgraded worker, never runs without tools."""
    from agentsteps.activities.tools.activities import ToolActivities
    from agentsteps.worker import load_registry, running_worker

    scripted.set_script(weather_then_answer())
    older_calls.clear()
    # Attempts a second apart: both workers poll, and under the default backoff a run of attempts lost
    # to the older one doubled the wait each time (70 s once); which worker wins is what is tested.
    spec = make_spec(tools=["get_weather"], llm_policy=ActivityPolicy(maximum_interval_seconds=1.0))
    # An older worker runs tools too (storing nothing): without tools.call there, every attempt of a tool call
    # could meet it on a loaded machine and fail the run, which no real rollout does.
    older_tools = ToolActivities(load_registry(settings))
    async with Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[AgentWorkflow],
        # An older worker answers a run recorded before the release's quota.plan too (harmless here).
        activities=[older_llm_call, older_tools.call, QuotaPlanActivities(settings).plan],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="weather"),
            id=f"test-older-{uuid.uuid4().hex[:10]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        # The older worker is the only one polling: its attempts fail (the name is not registered there).
        for _ in range(300):
            if await _resolving_call_attempts(handle) >= 2:
                break
            await asyncio.sleep(0.1)
        assert await _resolving_call_attempts(handle) >= 2
        # The upgraded worker is another process in a real rollout: its own client connection.
        upgraded = await Client.connect(
            client.service_client.config.target_host, namespace=client.namespace, data_converter=pydantic_data_converter
        )
        async with running_worker(upgraded, settings):
            result = await handle.result()

    assert result.status == "completed" and [r.name for s in result.steps for r in s.tool_calls] == ["get_weather"] * 2
    # The older worker may take later calls (they carry the schemas), never the one that names its tools.
    assert all(r.tool_names is None and r.tools for r in older_calls)


async def test_a_call_whose_every_attempt_met_an_older_worker_waits_for_an_upgraded_one_instead_of_failing(
    client, settings, scripted
):
    """In a rolling upgrade the older workers may take every attempt of the call only upgraded ones register:
    the run waits durably and schedules it again, never fails for it (one attempt here, so it would at once)."""
    from agentsteps.worker import running_worker

    scripted.set_script(weather_then_answer())
    spec = make_spec(tools=["get_weather"], llm_policy=ActivityPolicy(max_attempts=1))
    async with Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[AgentWorkflow],
        activities=[older_llm_call, QuotaPlanActivities(settings).plan],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="weather"),
            id=f"test-rollout-{uuid.uuid4().hex[:10]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        for _ in range(600):
            if "EVENT_TYPE_TIMER_STARTED" in await _event_types(handle):
                break
            await asyncio.sleep(0.1)
    events = await _event_types(handle)
    assert "EVENT_TYPE_ACTIVITY_TASK_FAILED" in events and "EVENT_TYPE_TIMER_STARTED" in events, events
    async with running_worker(client, settings):
        result = await handle.result()

    assert result.status == "completed" and [r.name for s in result.steps for r in s.tool_calls] == ["get_weather"] * 2


async def _event_types(handle) -> list[str]:
    return [EventType.Name(e.event_type) for e in (await handle.fetch_history()).events]
