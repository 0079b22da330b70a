"""One session never reads another's data: carried state only from its own continue-as-new, segments bound.

Before: ``SessionInput.carried`` was accepted from any starter, so a new
session whose ``carried.conversation`` named another session's head (visible in
that session's history) sent that conversation to its own model, and a
``carried.repl`` holding another session's signed dump loaded its variables.
"""

from __future__ import annotations

import json
import uuid

import pytest
from agent_support import make_spec
from code_mode_support import code_worker, connect_with_store, worker_settings
from session_support import failure_of, session_id, turn
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy

from agentsteps.client.sessions import continue_session, session_handle, session_state
from agentsteps.contracts.errors import PayloadIntegrityError
from agentsteps.contracts.llm.messages import Message
from agentsteps.contracts.names import SESSION_WORKFLOW, TURN_UPDATE
from agentsteps.contracts.session import (
    SessionCarry,
    SessionConfig,
    SessionInput,
    SessionOutcome,
    TurnInput,
    TurnResult,
)
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import build_payload_store

SECRET = "the vault code is 4711"


def program_reply(code: str) -> dict:
    return {"content": f"Here is the program.\n```python\n{code}```\n"}


SHORT = SessionConfig(continue_after_events=100)


async def carried_of(client: Client, sid: str) -> SessionCarry:
    """What the session's latest continue-as-new carried, read from its history as anyone with access can."""
    history = await session_handle(client, sid).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    [inp] = await client.data_converter.decode(started.input.payloads, [SessionInput])
    assert inp.carried is not None, "the session has not continued as new yet"
    return inp.carried


async def continue_once(client: Client, sid: str, send) -> None:  # noqa: ANN001
    for n in range(40):  # short turns until history passes 100 events and the session continues as new
        await send(f"note {n}")
        if (await session_state(client, sid)).continued:
            return
    raise AssertionError("the session never continued as new")


async def start_with(client: Client, task_queue: str, inp: SessionInput, text: str) -> BaseException:
    """A starter's session with ``inp`` (carried state in it); returns how its first turn was refused."""
    sid = session_id()
    start = WithStartWorkflowOperation(
        SESSION_WORKFLOW,
        inp,
        id=sid,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        result_type=SessionOutcome,
    )
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await client.execute_update_with_start_workflow(
            TURN_UPDATE, TurnInput(input=text), start_workflow_operation=start, result_type=TurnResult
        )
    with pytest.raises(WorkflowFailureError) as ended:
        await session_handle(client, sid).result()
    assert failure_of(ended.value).type == "CarriedStateError"
    return refused.value


async def test_a_session_carrying_another_sessions_conversation_is_refused_and_sends_none_of_it(engine, scripted):
    scripted.set_script({"default": {"content": "Noted."}})
    victim = session_id()
    await turn(engine, victim, f"remember: {SECRET}", config=SHORT)
    await continue_once(engine.client, victim, lambda text: turn(engine, victim, text, config=SHORT))
    stolen = await carried_of(engine.client, victim)
    assert stolen.conversation is not None and stolen.chain is not None
    sent_before = len(scripted.requests)

    spec = make_spec(tools=["get_weather"])
    as_is = await start_with(engine.client, engine.task_queue, SessionInput(spec=spec, carried=stolen), "what code?")
    unbound = stolen.model_copy(update={"chain": None})  # as an older release carried it
    legacy = await start_with(engine.client, engine.task_queue, SessionInput(spec=spec, carried=unbound), "what code?")

    for refused in (as_is, legacy):
        failure = failure_of(refused)
        assert failure.type == "CarriedStateError" and "own continue-as-new" in failure.message
    assert len(scripted.requests) == sent_before  # no model call at all: nothing of the victim was loaded
    assert not [r for r in scripted.requests[sent_before:] if "4711" in json.dumps(r.body)]
    # The victim itself goes on, with its memory.
    assert (await turn(engine, victim, "still there?", config=SHORT)).output == "Noted."


async def test_a_session_carrying_another_sessions_repl_dump_is_refused_and_loads_none_of_it(
    temporal_env, scripted, tmp_path
):
    scripted.set_script(
        {
            "rules": [
                {"match": {"contains": "keep the code"}, "reply": program_reply(f'vault = "{SECRET}"\nlen(vault)\n')},
                {"match": {"contains": "what is the code"}, "reply": program_reply("vault\n")},
                {"match": {"role": "user"}, "reply": program_reply("1 + 1\n")},
            ]
        }
    )
    settings = worker_settings(tmp_path / "state", f"carry-{uuid.uuid4().hex[:8]}", scripted.url_openai)
    client = await connect_with_store(temporal_env.client.service_client.config.target_host, settings)
    spec = make_spec(tools=[], mode="code", max_steps=4, reprompt_budget=1)
    async with code_worker(client, settings):
        victim = session_id()

        async def send(text: str) -> TurnResult:
            return await continue_session(client, victim, text)

        start = WithStartWorkflowOperation(
            SESSION_WORKFLOW,
            SessionInput(spec=spec, session=SHORT),
            id=victim,
            task_queue=settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            result_type=SessionOutcome,
        )
        await client.execute_update_with_start_workflow(
            TURN_UPDATE, TurnInput(input="keep the code"), start_workflow_operation=start, result_type=TurnResult
        )
        await continue_once(client, victim, send)
        stolen = await carried_of(client, victim)
        assert stolen.repl is not None and stolen.repl.snapshot is not None
        # Only the REPL: the thief's own conversation, the victim's signed dump and its key.
        only_repl = SessionCarry(created_at=stolen.created_at, last_activity=stolen.last_activity, repl=stolen.repl)
        sent_before = len(scripted.requests)
        refused = await start_with(
            client, settings.task_queue, SessionInput(spec=spec, carried=only_repl), "what is the code?"
        )
        own = (await send("what is the code?")).output

    failure = failure_of(refused)
    assert failure.type == "CarriedStateError"
    assert not [r for r in scripted.requests[sent_before:-1] if "vault" in json.dumps(r.body)]
    assert own == SECRET  # the victim still reads its own variable


async def test_a_stored_conversation_segment_loads_only_for_the_session_that_wrote_it(tmp_path, settings):
    conversations = ConversationStore(build_payload_store(settings))
    said = [Message.system("You are a desk."), Message.user(SECRET)]
    head = await conversations.extend(None, said, said, owner="desk-a/run-1")
    assert await conversations.load(head, "desk-a/run-1") == said  # and now it is cached, verified, for desk-a

    for stranger in ("desk-b/run-9", "desk-a/run-2", ""):  # another session; a new one under the same id; unbound
        with pytest.raises(Exception) as refused:
            await conversations.load(head, stranger)
        assert "PayloadIntegrityError" in repr(refused.value) or isinstance(refused.value, PayloadIntegrityError)
        assert "belongs to another run or session" in str(refused.value)
    # The same messages stored by another session are another segment, not a shared one.
    other = await conversations.extend(None, said, said, owner="desk-b/run-9")
    assert other.sha256 != head.sha256
