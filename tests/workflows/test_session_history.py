"""History that does not grow with the conversation: a stored hash chain, continue-as-new between turns."""

from __future__ import annotations

import hashlib
import os

import pytest
from agent_support import model_call_events
from session_support import session_id, turn
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from agentsteps.client.sessions import continue_session, session_state
from agentsteps.contracts import Message
from agentsteps.contracts.llm.conversation import ConversationRef
from agentsteps.contracts.names import (
    LLM_CALL,
    LLM_CALL_PLAN_FIRST,
    LLM_CALL_RESOLVING_TOOLS,
    LLM_CALL_STORED_RESULTS,
    LLM_CALL_TOOL_CATALOG,
)
from agentsteps.contracts.session import SessionConfig
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore
from agentsteps.workflows.session import SessionWorkflow

# 100 turns continue as new about five times, as 500 do at 1,000 events (about ten events a turn), in a fifth of
# the time; AGENTSTEPS_SESSION_TURNS=500 runs the long session.
TURNS = int(os.environ.get("AGENTSTEPS_SESSION_TURNS", "100"))


async def test_a_long_session_continues_as_new_and_its_last_turn_sees_turn_one(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {"match": {"contains": "what was the code", "any_contains": "PX-4417"}, "reply": {"content": "PX-4417"}}
            ],
            "default": {"content": "noted"},
        }
    )
    sid = session_id()
    config = SessionConfig(continue_after_events=2 * TURNS)
    await turn(engine, sid, "remember the code PX-4417", config=config, tools=[])
    for n in range(2, TURNS):
        await continue_session(engine.client, sid, f"note {n}: nothing to see")
    last = await continue_session(engine.client, sid, "what was the code?")
    state = await session_state(engine.client, sid)

    assert (last.turn, last.output) == (TURNS, "PX-4417")
    assert state.continued >= 4 and state.turns == TURNS
    # The model got the whole conversation: the system message, 2 per earlier turn, the question.
    assert len(scripted.requests[-1].body["messages"]) == 1 + 2 * (TURNS - 1) + 1

    runs = await _runs(engine.client, sid)
    assert len(runs) == state.continued + 1
    first_sizes, last_sizes = _llm_input_sizes(runs[0]), _llm_input_sizes(runs[-1])
    # What a call adds to history does not depend on how long the conversation is.
    assert max(last_sizes) <= 1.2 * max(first_sizes[1:]), (first_sizes[:5], last_sizes[-5:])

    # Every run of the chain replays against today's code: continue-as-new is deterministic.
    replayer = Replayer(workflows=[SessionWorkflow], data_converter=pydantic_data_converter)
    for history in runs:
        await replayer.replay_workflow(history)


async def _runs(client: Client, sid: str) -> list:
    """Each run's history, oldest first, following the continue-as-new chain."""
    described = await client.get_workflow_handle(sid).describe()
    first_run = described.raw_description.workflow_execution_info.first_run_id
    first = await client.get_workflow_handle(sid, run_id=first_run).fetch_history()
    histories = [first]
    while True:
        last = histories[-1].events[-1]
        if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return histories
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        histories.append(await client.get_workflow_handle(sid, run_id=run_id).fetch_history())


def _llm_input_sizes(history) -> list[int]:
    """The input size of each activity that made a model call (an ``llm.call``, or a tool call carrying one)."""
    return [size for _, size, _ in model_call_events(history)]


async def test_an_altered_or_malformed_stored_conversation_fails_typed_and_is_never_retried(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path))
    first = ConversationStore(store)
    head = await first.extend(
        None, [Message.system("s"), Message.user("hello")], [Message.system("s"), Message.user("hello")]
    )
    second = await first.extend(head, [], [Message(role="assistant", content="hi")])

    loaded = await ConversationStore(store).load(second)  # a worker without the cache rebuilds it
    assert [m.content for m in loaded] == ["s", "hello", "hi"]

    path = LocalDirStorageDriver(tmp_path).path_for(head.claim["hash_value"])
    path.write_bytes(path.read_bytes().replace(b"hello", b"HELLO"))
    with pytest.raises(ApplicationError) as altered:
        await ConversationStore(store).load(second)
    assert altered.value.type == "PayloadIntegrityError" and altered.value.non_retryable

    # Bytes whose digest matches but that are not a segment (or claim another length).
    junk = b'{"v": 1, "prev": null, "length": 7, "messages": "nope"}'
    claim = await store.put(junk)
    forged = ConversationRef(sha256=hashlib.sha256(junk).hexdigest(), length=2, claim=claim)
    with pytest.raises(ApplicationError) as malformed:
        await ConversationStore(store).load(forged)
    assert malformed.value.type == "PayloadIntegrityError" and "malformed" in malformed.value.message
