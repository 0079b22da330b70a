"""A session's tool schemas are stored once, as a catalog bound to the session, and named by every model call.

The session's first model call carrying its schemas asks the worker to store
them (``store_tools``); every later call of every turn, across
continue-as-new, names the catalog (``tools_ref``, carried in
``SessionCarry.tools_ref``). The payload gc keeps it while the session lives;
a session that describes its tools again names a catalog of the new schemas;
a fork stores its own; and a catalog that is altered or gone fails the turn
typed, never retried.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone

from agent_support import make_spec, model_call_events
from pydantic import BaseModel
from session_support import failure_of, memory_script, session_id
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowUpdateFailedError
from temporalio.common import RawValue, WorkflowIDConflictPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import Replayer

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.payload_gc import collect_garbage
from agentsteps.client.session_forks import fork_session
from agentsteps.client.sessions import continue_session, send_turn, session_handle, session_state, session_turns
from agentsteps.contracts import AgentSpec
from agentsteps.contracts.errors import AgentStepsError
from agentsteps.contracts.names import LLM_CALL_PLAN_FIRST, LLM_CALL_TOOL_CATALOG, TOOLS_CALL, TURN_UPDATE
from agentsteps.contracts.session import SessionConfig, SessionInput, SessionOutcome, TurnInput, TurnResult
from agentsteps.storage.payload_store import build_payload_store
from agentsteps.worker import build_data_converter, running_worker
from agentsteps.workflows.entries import NO_INPUT
from agentsteps.workflows.session import SessionWorkflow

SCRIPT = {**memory_script(), "default": {"content": "Noted."}}
SHORT = SessionConfig(continue_after_events=100)
WEATHER_V1 = "The weather in a city, as the first build describes it."
WEATHER_V2 = "The weather in a city, as the second build describes it (a changed tool set)."


class City(BaseModel):
    city: str


def weather_registry(description: str) -> ToolRegistry:
    tools = ToolRegistry()

    def get_weather(args: City) -> dict:
        return {"city": args.city, "sky": "sunny"}

    get_weather.__doc__ = description
    tools.tool()(get_weather)

    def send_notification(args: City) -> dict:
        """Tell the user about a city."""
        return {"sent": args.city}

    tools.tool()(send_notification)
    return tools


def llm_calls(history) -> list[tuple[str, dict]]:
    """Each model call's activity name and request (``tools.call`` for a call a tool step carried)."""
    return [(name, request) for name, _, request in model_call_events(history)]


def first_ref(history) -> dict:
    """The ``tools_ref`` of the first llm.call result that has one."""
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            result = json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data)
            if isinstance(result, dict) and isinstance(result.get("response"), dict):
                result = result["response"]  # llm.call.plan_first's answer when the worker had no quota plan
            if isinstance(result, dict) and result.get("tools_ref"):
                return result["tools_ref"]
    raise AssertionError("no model call returned a tool catalog")


async def runs(client: Client, sid: str) -> list:
    """Each run's history, oldest first, following the continue-as-new chain."""
    described = await client.get_workflow_handle(sid).describe()
    first_run = described.raw_description.workflow_execution_info.first_run_id
    histories = [await client.get_workflow_handle(sid, run_id=first_run).fetch_history()]
    while (last := histories[-1].events[-1]).event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        histories.append(await client.get_workflow_handle(sid, run_id=run_id).fetch_history())
    return histories


async def continue_as_new(client: Client, sid: str) -> None:
    for n in range(40):  # short turns until history passes the threshold and the session continues as new
        if (await session_state(client, sid)).continued:
            return
        await continue_session(client, sid, f"note {n}")
    raise AssertionError("the session never continued as new")


async def next_turn(client: Client, sid: str, text: str) -> TurnResult:
    """``continue_session`` on a worker just started: the server may refuse the update for a moment while the
    session's last worker (gone) is still its sticky one."""
    for _ in range(60):
        try:
            return await continue_session(client, sid, text)
        except RPCError as exc:
            if "no poller" not in str(exc):
                raise
            await asyncio.sleep(1)
    raise AssertionError("no worker took the turn")


def fresh_session(scripted) -> tuple[str, AgentSpec]:  # noqa: ANN001
    """A new session's id and its spec (two tools), the scripted model answering from the start of ``SCRIPT``."""
    scripted.set_script(SCRIPT)
    return session_id(), make_spec(tools=["get_weather", "send_notification"])


def state_turns(turns):  # noqa: ANN001, ANN201
    return sorted(turns, key=lambda t: t.turn)


def holding(history, text: str) -> list[str]:
    return [
        EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        for e in history.events
        if text.encode() in e.SerializeToString()
    ]


async def test_a_session_stores_its_tools_once_and_every_call_names_them_across_continue_as_new_and_gc(
    client, settings, scripted
):
    sid, spec = fresh_session(scripted)
    store = build_payload_store(settings)
    async with running_worker(client, settings, registry=weather_registry(WEATHER_V1)):
        first = await send_turn(
            client, spec, "weather in Lisbon?", session_id=sid, task_queue=settings.task_queue, config=SHORT
        )
        assert first.output == "Lisbon is sunny"
        assert (await continue_session(client, sid, "what did I ask?")).output == "about Lisbon"
        await continue_as_new(client, sid)

    histories = await runs(client, sid)
    ref = first_ref(histories[0])
    calls = llm_calls(histories[0])
    # The session's first call carries the schemas and asks to store them; every later one names the catalog,
    # its own llm.call or one a weather lookup carried (contracts/llm/next_call.py).
    # A session run's first call also asks the worker's quota plan (none here: it is the call).
    assert calls[0][0] == LLM_CALL_PLAN_FIRST and calls[0][1]["store_tools"] is True and len(calls[0][1]["tools"]) == 2
    assert len(calls) >= 3
    for name, body in calls[1:]:
        assert name in (LLM_CALL_TOOL_CATALOG, TOOLS_CALL) and body["tools_ref"] == ref and not body.get("tools"), name
    # The schemas are in no later call: only in the describe result, the first call and the carried state.
    assert holding(histories[0], WEATHER_V1) == [
        "ACTIVITY_TASK_COMPLETED",
        "ACTIVITY_TASK_SCHEDULED",
        "WORKFLOW_EXECUTION_CONTINUED_AS_NEW",
    ]
    started = histories[-1].events[0].workflow_execution_started_event_attributes
    [carried] = await client.data_converter.decode(started.input.payloads, [SessionInput])
    assert carried.carried.tools_ref.model_dump() == ref

    # While the continued run waits for its next turn (no call of it names the catalog yet), a gc as if a month
    # had passed: only the open run's carried state reaches the catalog, and it is kept.
    catalog_file = store.driver.path_for(ref["claim"]["hash_value"])
    assert catalog_file.exists()
    unreachable = await store.put(b"nobody names this either " * 10)
    report = await collect_garbage(
        client, store, timedelta(days=30), delete=True, now=datetime.now(timezone.utc) + timedelta(days=31)
    )
    assert unreachable["hash_value"] in [o.digest for o in report.garbage], "the gc deleted what nothing reaches"
    assert catalog_file.exists(), "the gc collected the catalog an open session carries"

    # Another worker (empty caches) takes the next turn: it names the carried catalog, read from the store.
    scripted.set_script(SCRIPT)  # forgets the requests so far
    async with running_worker(client, settings, registry=weather_registry(WEATHER_V1)):
        assert (await next_turn(client, sid, "weather in Lisbon?")).output == "Lisbon is sunny"
    later = llm_calls((await runs(client, sid))[-1])
    assert [name for name, _ in later] == [LLM_CALL_PLAN_FIRST, TOOLS_CALL]
    assert all(body["tools_ref"] == ref for _, body in later)
    sent = [r.body["tools"] for r in scripted.requests]
    assert len(sent) == 2 and sent[0] == sent[1] and len(sent[0]) == 2
    assert WEATHER_V1 in json.dumps(sent[0])

    replayer = Replayer(workflows=[SessionWorkflow], data_converter=pydantic_data_converter)
    for history in await runs(client, sid):
        await replayer.replay_workflow(history)
    await store.aclose()


SESSION_DESCRIBING_AGAIN = "test.session_describing_again"


@workflow.defn(name=SESSION_DESCRIBING_AGAIN)
class SessionDescribingAgain(SessionWorkflow):
    """A build whose continued run describes its tools again (it carries none of its schemas), as a session
    whose tool set changed: the carried catalog names the old schemas and must not be used for the new ones."""

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> SessionOutcome:
        return await super().run(raw)

    def _next_run(self, inp, stream, carry_decisions):  # noqa: ANN001, ANN202
        following = super()._next_run(inp, stream, carry_decisions)
        assert following.carried is not None and following.carried.tools_ref is not None
        following.carried.tools = None  # the ref stays: only the pairing in the session keeps it from being used
        return following


async def test_a_session_that_describes_its_tools_again_names_a_catalog_of_the_new_schemas(client, settings, scripted):
    sid, spec = fresh_session(scripted)
    inp = SessionInput(spec=spec, session=SHORT)
    async with running_worker(
        client, settings, registry=weather_registry(WEATHER_V1), extra_workflows=[SessionDescribingAgain]
    ):
        start = WithStartWorkflowOperation(
            SESSION_DESCRIBING_AGAIN,
            inp,
            id=sid,
            task_queue=settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            result_type=SessionOutcome,
        )
        first = await client.execute_update_with_start_workflow(
            TURN_UPDATE,
            TurnInput(input="weather in Lisbon?"),
            start_workflow_operation=start,
            result_type=TurnResult,
        )
        assert first.output == "Lisbon is sunny"
        await continue_as_new(client, sid)
    old_ref = first_ref((await runs(client, sid))[0])

    # The next build offers other schemas for the same tools; the continued run describes them.
    scripted.set_script(SCRIPT)  # forgets the requests so far
    async with running_worker(
        client, settings, registry=weather_registry(WEATHER_V2), extra_workflows=[SessionDescribingAgain]
    ):
        assert (await next_turn(client, sid, "weather in Lisbon?")).output == "Lisbon is sunny"
    # The model got the new schemas on both calls, never the old ones.
    sent = [json.dumps(r.body["tools"]) for r in scripted.requests]
    assert len(sent) == 2 and all(WEATHER_V2 in s and WEATHER_V1 not in s for s in sent)
    last = (await runs(client, sid))[-1]
    calls = llm_calls(last)
    # Its first call carried the new schemas and stored them; the next named that new catalog, not the old one.
    assert calls[0][0] == LLM_CALL_PLAN_FIRST and calls[0][1]["store_tools"] is True and "tools_ref" not in calls[0][1]
    new_ref = first_ref(last)
    assert new_ref["sha256"] != old_ref["sha256"]
    assert calls[1][0] == TOOLS_CALL and calls[1][1]["tools_ref"] == new_ref


async def test_a_fork_stores_its_own_catalog_and_never_names_its_sources(client, settings, scripted):
    sid, spec = fresh_session(scripted)
    converter = build_data_converter(settings)
    store = build_payload_store(settings)
    async with running_worker(client, settings, registry=weather_registry(WEATHER_V1)):
        await send_turn(client, spec, "weather in Lisbon?", session_id=sid, task_queue=settings.task_queue)
        await continue_session(client, sid, "hello")
        source_ref = first_ref((await runs(client, sid))[0])
        fork_id, forked = await fork_session(
            client, sid, 2, 0, data_converter=converter, task_queue=settings.task_queue
        )
        assert forked.status == "completed"
        assert (await continue_session(client, fork_id, "weather in Lisbon?")).output == "Lisbon is sunny"

    history = await session_handle(client, fork_id).fetch_history()
    calls = llm_calls(history)
    assert len(calls) >= 2
    # The fork's first call carries the schemas and stores them bound to the fork; later ones name that.
    assert calls[0][0] == LLM_CALL_PLAN_FIRST and calls[0][1]["store_tools"] is True and "tools_ref" not in calls[0][1]
    fork_ref = first_ref(history)
    assert fork_ref["sha256"] != source_ref["sha256"]
    for name, body in calls[1:]:
        assert name in (LLM_CALL_TOOL_CATALOG, TOOLS_CALL) and body["tools_ref"] == fork_ref
    stored = json.loads(await store.get(fork_ref["claim"]))
    assert stored["owner"].startswith(f"{fork_id}/") and not stored["owner"].startswith(f"{sid}/")
    await Replayer(workflows=[SessionWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)
    await store.aclose()


async def test_an_altered_or_missing_session_catalog_fails_the_turn_typed_and_is_never_retried(
    client, settings, scripted
):
    sid, spec = fresh_session(scripted)
    store = build_payload_store(settings)
    async with running_worker(client, settings, registry=weather_registry(WEATHER_V1)):
        await send_turn(client, spec, "hello", session_id=sid, task_queue=settings.task_queue)
    ref = first_ref(await session_handle(client, sid).fetch_history())
    catalog_file = store.driver.path_for(ref["claim"]["hash_value"])
    original = catalog_file.read_bytes()

    async def failed_turn(text: str) -> tuple[str, int]:
        async with running_worker(client, settings, registry=weather_registry(WEATHER_V1)):  # empty caches
            try:
                await next_turn(client, sid, text)
            except AgentStepsError as exc:
                failure = failure_of(exc)
            else:
                raise AssertionError("a turn naming an unreadable catalog completed")
        history = await session_handle(client, sid).fetch_history()
        attempts = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        ]
        assert failure.non_retryable
        return failure.type, attempts[-1]

    catalog_file.write_bytes(original.replace(WEATHER_V1.encode(), WEATHER_V1.upper().encode()))
    assert await failed_turn("hello again") == ("PayloadIntegrityError", 1)
    catalog_file.unlink()
    assert await failed_turn("hello once more") == ("PayloadMissingError", 1)
    # The session itself goes on, its failed turns recorded as failed.
    async with running_worker(client, settings, registry=weather_registry(WEATHER_V1)):
        for _ in range(60):
            try:
                state = await session_state(client, sid)
                break
            except RPCError:  # the session's last worker is gone; the server moves it to this one
                await asyncio.sleep(1)
        assert state.status == "idle" and state.turns == 3
        assert [t.status for t in state_turns(await session_turns(client, sid))] == ["completed", "failed", "failed"]
    await store.aclose()


def test_the_catalog_ref_is_carried_only_when_set():
    """Carried state of a session with no catalog has the shape older workers wrote (no new key)."""
    from agentsteps.contracts.session import SessionCarry

    now = datetime.now(timezone.utc)
    assert "tools_ref" not in SessionCarry(created_at=now, last_activity=now).model_dump(mode="json")
