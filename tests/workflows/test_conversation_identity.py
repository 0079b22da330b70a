"""Conversation identity: messages are immutable values and a stored prefix is recognised by value.

A loop that rebuilds equal messages must not resend the conversation, a
changed message must reach the model (never be dropped for a stored prefix
it no longer equals), and editing a message in place is refused.
"""

from __future__ import annotations

import json
import uuid

import pytest
from agent_support import make_spec
from pydantic import ValidationError
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.worker import UnsandboxedWorkflowRunner

from agentsteps.contracts import AgentSpec, LLMConfig, LLMRequest, LLMToolCall, Message
from agentsteps.contracts.llm.conversation import ConversationRef
from agentsteps.contracts.names import (
    LLM_CALL,
    LLM_CALL_PLAN_FIRST,
    LLM_CALL_RESOLVING_TOOLS,
    LLM_CALL_STORED_RESULTS,
    LLM_CALL_TOOL_CATALOG,
    MODEL_CALLS,
)
from agentsteps.workflows.agent_run import AgentRun
from agentsteps.workflows.approvals import ApprovalDesk
from agentsteps.workflows.conversation import ConversationChain
from agentsteps.workflows.releases.gates import Features
from agentsteps.workflows.run_state import RunProgress

CONFIG = LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=16_000)


def _ref(n: int) -> ConversationRef:
    return ConversationRef(sha256=f"{n:064x}", length=n)


def _copy(messages: list[Message]) -> list[Message]:
    """Equal messages, none of them the same object: what a loop that rebuilds its list makes."""
    return [Message.model_validate(m.model_dump()) for m in messages]


HISTORY = [
    Message.system("you are terse"),
    Message.user("weather in Paris?"),
    Message(role="assistant", tool_calls=[LLMToolCall(id="c1", name="get_weather", arguments='{"city":"Paris"}')]),
    Message(role="tool", tool_call_id="c1", name="get_weather", content="sunny"),
]


# ------------------------------------------------------------------ immutable values


def test_a_message_cannot_be_edited_in_place():
    message = HISTORY[2]
    with pytest.raises(ValidationError):
        message.content = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        message.tool_calls[0].arguments = "{}"  # type: ignore[misc]
    assert isinstance(message.tool_calls, tuple)
    with pytest.raises(AttributeError):
        message.tool_calls.append(LLMToolCall(id="c2", name="x"))  # type: ignore[attr-defined]
    # A change is a new value; the original is untouched.
    changed = message.model_copy(update={"content": "changed"})
    assert changed != message and message.content is None


def test_equal_messages_are_equal_and_hashable_values():
    assert _copy(HISTORY) == HISTORY
    assert len({*HISTORY, *_copy(HISTORY)}) == len(HISTORY)


# ------------------------------------------------------------------ the chain's rule, by value


def test_a_rebuilt_but_equal_history_sends_only_what_follows_the_stored_prefix():
    chain = ConversationChain(None)
    chain.learn(HISTORY, _ref(4))
    follow_up = Message.user("and tomorrow?")
    sent = chain.request(LLMRequest(config=CONFIG, messages=[*_copy(HISTORY), follow_up]))
    assert sent.conversation == _ref(4) and sent.messages == [follow_up]
    assert chain.commit([*_copy(HISTORY), follow_up]) == (_ref(4), [follow_up])


def test_an_edited_message_starts_a_new_segment_and_is_sent():
    base = _ref(1)
    chain = ConversationChain(base)
    chain.learn(HISTORY[:2], _ref(3))
    chain.learn(HISTORY, _ref(5))
    edited = HISTORY[3].model_copy(update={"content": "rain"})
    tail = [*HISTORY[:3], edited, Message.user("sure?")]
    sent = chain.request(LLMRequest(config=CONFIG, messages=tail))
    # The longest stored prefix it still equals is the first two messages: the edit is sent, not dropped.
    assert sent.conversation == _ref(3) and sent.messages == tail[2:]
    assert edited in sent.messages
    # Nothing stored equals it: the whole tail on the base.
    other = ConversationChain(base)
    other.learn(HISTORY, _ref(5))
    renamed = [HISTORY[0].model_copy(update={"content": "you are verbose"}), *HISTORY[1:]]
    assert other.commit(renamed) == (base, renamed)


def test_the_longest_equal_stored_prefix_wins_whatever_order_it_was_learned_in():
    chain = ConversationChain(None)
    chain.learn(HISTORY, _ref(4))
    chain.learn(HISTORY[:2], _ref(2))  # a fallback model restarting from an earlier point
    sent = chain.request(LLMRequest(config=CONFIG, messages=_copy(HISTORY)))
    assert sent.conversation == _ref(4) and sent.messages == []


# ------------------------------------------------------------------ through llm.call and the store


@workflow.defn(name="TestRebuiltHistory")
class RebuiltHistory:
    """Three chained model calls; before the third the loop rebuilds (and maybe edits) its messages."""

    @workflow.run
    async def run(self, spec: AgentSpec, edit: bool) -> None:
        features = Features.at_start(one_shot=False)
        run = AgentRun.for_turn(
            spec, [], features, turn=1, conversation=None, approvals=ApprovalDesk(), progress=RunProgress()
        )
        history = [Message.system("you are terse"), Message.user("hello")]
        first = await run.call_llm(LLMRequest(config=spec.model, messages=history))
        history = [*history, first.message, Message.user("again")]
        second = await run.call_llm(LLMRequest(config=spec.model, messages=history))
        history = _copy([*history, second.message])
        if edit:
            history[1] = history[1].model_copy(update={"content": "hello, edited"})
        await run.call_llm(LLMRequest(config=spec.model, messages=[*history, Message.user("third")]))


async def _run(client, settings, edit: bool) -> list[dict]:
    from agentsteps.worker import running_worker

    async with running_worker(
        client, settings, extra_workflows=[RebuiltHistory], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow(
            "TestRebuiltHistory",
            args=[make_spec(tools=[], model=CONFIG), edit],
            id=f"test-rebuilt-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
        )
        await handle.result()
        history = await handle.fetch_history()
    return [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name in MODEL_CALLS
    ]


async def test_a_rebuilt_history_is_not_resent_to_history_and_the_model_still_gets_it_all(client, settings, scripted):
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    inputs = await _run(client, settings, edit=False)
    # The third call's five earlier messages are copies: the stored four are not sent again.
    assert [len(i["messages"]) for i in inputs] == [2, 2, 2]
    assert inputs[2]["conversation"]["length"] == 4
    assert len(scripted.requests[-1].body["messages"]) == 6


async def test_an_edited_message_in_a_rebuilt_history_reaches_the_model(client, settings, scripted):
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    inputs = await _run(client, settings, edit=True)
    # No stored prefix equals the edited list: it starts a new segment and all six messages are sent.
    assert [len(i["messages"]) for i in inputs] == [2, 2, 6]
    assert inputs[2]["conversation"] is None
    sent = scripted.requests[-1].body["messages"]
    assert len(sent) == 6 and sent[1]["content"] == "hello, edited"
