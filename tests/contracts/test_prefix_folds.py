"""Folds resumed from a conversation prefix decide exactly what folding from scratch does (pure, no Temporal).

Each derivation ``llm.call`` keeps per prefix (``contracts/llm/prefix.py``) is
checked at every split of a conversation that has something for each of them
to find: role-order and pairing violations, unicode, long texts, a repeated
call id, an empty assistant message.
"""

from __future__ import annotations

import pytest

from agentsteps.contracts import LLMConfig, LLMRequest, LLMToolCall, Message, ToolSchema
from agentsteps.contracts.llm.call_ids import with_engine_call_ids
from agentsteps.contracts.llm.context import fits
from agentsteps.contracts.llm.preconditions import check_request
from agentsteps.contracts.llm.prefix import Folds, KnownPrefix
from agentsteps.contracts.llm.tokens import count_prompt_tokens, prompt_tokens_upper_bound

pytestmark = pytest.mark.fast

WEATHER = ToolSchema(
    name="get_weather",
    description="Weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def call(call_id: str) -> Message:
    return Message(
        role="assistant", tool_calls=(LLMToolCall(id=call_id, name="get_weather", arguments='{"city":"Paris"}'),)
    )


def result(call_id: str | None, text: str = '{"temp": 21}') -> Message:
    return Message(role="tool", tool_call_id=call_id, name="get_weather", content=text)


def conversation() -> list[Message]:
    return [
        Message.system("Be brief. ☀️ Ünïcödé"),
        Message.user("Weather in Paris?"),
        call("c1"),
        result("c1", "x" * 3000),
        call("c2"),
        result("c2"),
        Message(role="assistant", content=""),  # empty: skipped on the OpenAI wire
        Message.user("and again"),
        call("c1"),  # an id used before
        result("c1"),
        result("c9"),  # answers no open call
        Message.system("late"),  # a system message after the others
        call("c3"),
        Message(role="user", content="\u65e5\u672c \U0001f600", name="someone"),  # c3 never answered
    ]


def request(messages: list[Message], **config) -> LLMRequest:
    values = {"model": "gpt-4o-2024-08-06", "max_tokens": 64, "context_window": 1_500, **config}
    return LLMRequest(config=LLMConfig(**values), messages=messages, tools=[WEATHER], token_allowance=2_000)


ANSWER = Message(role="assistant", tool_calls=(LLMToolCall(id="c1", name="get_weather"), LLMToolCall(id="", name="x")))


def derived(req: LLMRequest, folds: Folds | None) -> tuple:
    return (
        check_request(req, folds),
        prompt_tokens_upper_bound(req, folds),
        count_prompt_tokens(req, folds),
        fits(req, folds),
        with_engine_call_ids(ANSWER, req.messages, folds),
    )


def warmed(prefix: list[Message], **config) -> KnownPrefix:
    """``prefix`` as the call that stored it leaves it: every fold kept."""
    known = KnownPrefix(prefix)
    derived(request(list(known.messages), **config), Folds(KnownPrefix(()), known))
    return known


@pytest.mark.parametrize("config", [{}, {"context_window": 128_000}])
def test_every_fold_resumed_at_any_split_decides_what_it_decides_from_scratch(config):
    messages = conversation()
    cold = derived(request(messages, **config), None)
    assert cold[0] and cold[4] is not ANSWER  # there is something to find: violations, a renamed call id
    for split in range(len(messages) + 1):
        known = warmed(messages[:split], **config)
        assert set(known.kinds()) >= {"pre.order", "tokens.bound", "call_ids.used"}
        full = [*known.messages, *messages[split:]]
        following = KnownPrefix(full)
        assert derived(request(full, **config), Folds(known, following)) == cold, split
        # and what it leaves for the next call resumes to the same again
        assert derived(request(list(following.messages), **config), Folds(following, None)) == cold, split


def test_a_kept_state_is_resumed_only_for_the_prefix_s_own_messages():
    messages = [Message.system("s"), Message.user("go"), call("c1"), result("c1")]
    known = warmed(messages)
    assert check_request(request([*known.messages, call("c2"), result("c2")]), Folds(known)) == []

    # Equal values in other objects, one of them altered (its result now answers nothing): not resumed,
    # so the prefix's state (no violation) cannot hide the change.
    altered = [Message.system("s"), Message.user("go"), call("c1"), result("c7"), call("c2"), result("c2")]
    violations = check_request(request(altered), Folds(known))
    assert [v.path for v in violations] == ["$.messages[3].tool_call_id", "$.messages[2].tool_calls[0].id"]
    assert violations == check_request(request(altered))

    # A list shorter than the prefix (compacted) folds from the start too.
    assert check_request(request([Message.user("only")]), Folds(known)) == []


def test_a_state_is_left_only_for_exactly_the_following_conversation():
    messages = [Message.system("s"), Message.user("go")]
    following = KnownPrefix(messages)
    check_request(request([*messages, Message.user("more")]), Folds(None, following))
    assert following.kinds() == []  # another list than the one it stands for
    check_request(request(list(following.messages)), Folds(None, following))
    assert following.kinds() == ["pre.order", "tokens.bound"]


def test_a_kept_state_is_never_changed_by_the_calls_that_resume_it():
    messages = [Message.system("s"), Message.user("go"), call("c1")]  # c1 still open
    known = warmed(messages)
    for _ in range(3):
        # each call closes c1 (a violation) or answers it, on its own copy of the state
        assert check_request(request([*known.messages, result("c1")]), Folds(known)) == []
        assert len(check_request(request([*known.messages, Message.user("?")]), Folds(known))) == 1


def test_a_conversation_full_of_violations_reports_the_same_first_ones_resumed_or_not():
    messages = [Message.user("go"), *(result(f"orphan{n}") for n in range(30)), call("open")]
    cold = check_request(request(messages))
    for split in (1, 10, 31):
        known = warmed(messages[:split])
        assert check_request(request([*known.messages, *messages[split:]]), Folds(known)) == cold, split
    assert len(cold) == 5 and cold[0].path == "$.messages[1].tool_call_id"
