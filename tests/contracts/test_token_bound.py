"""The byte bound that lets the context-window precondition skip tokenizing.

``check_request`` tokenizes the prompt only when ``prompt_tokens_upper_bound``
does not already prove it fits, so the bound must never be below the exact
count, and a prompt whose bytes exceed the window while its tokens do not must
still pass (the exact count decides).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentsteps.contracts import LLMConfig, LLMRequest, Message, ToolSchema
from agentsteps.contracts.llm.messages import LLMToolCall
from agentsteps.contracts.llm.preconditions import check_request
from agentsteps.contracts.llm.tokens import count_prompt_tokens, count_text_tokens, prompt_tokens_upper_bound
from agentsteps.contracts.violations import ViolationKind

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

PINNED = "gpt-4o-mini-2024-07-18"
TOOL = ToolSchema(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
texts = st.text(st.characters(codec="utf-8"), max_size=300)


def _request(messages: list[Message], *, window: int = 128_000, max_tokens: int = 256) -> LLMRequest:
    return LLMRequest(
        config=LLMConfig(model=PINNED, max_tokens=max_tokens, context_window=window), messages=messages, tools=[TOOL]
    )


@settings(max_examples=200, deadline=None)
@given(texts)
def test_a_text_never_has_more_tokens_than_utf8_bytes(text):
    assert count_text_tokens(text) <= len(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(texts, texts, texts), min_size=1, max_size=6))
def test_the_bound_is_never_below_the_exact_prompt_count(turns):
    messages = [Message.system("be brief")]
    for i, (question, arguments, result) in enumerate(turns):
        messages += [
            Message.user(question),
            Message(role="assistant", tool_calls=[LLMToolCall(id=f"c{i}", name="get_weather", arguments=arguments)]),
            Message(role="tool", tool_call_id=f"c{i}", name="get_weather", content=result),
        ]
    request = _request(messages)
    assert count_prompt_tokens(request) <= prompt_tokens_upper_bound(request)


def test_a_prompt_over_the_window_in_bytes_but_not_in_tokens_passes_on_the_exact_count():
    # "hello " is one token per 6 bytes: the bound says 30k, the tokenizer about 5k.
    request = _request([Message.user("hello " * 5_000)], window=16_000, max_tokens=256)
    assert prompt_tokens_upper_bound(request) + 256 > 16_000
    assert check_request(request) == []


def test_a_prompt_over_the_window_in_tokens_is_still_rejected():
    request = _request([Message.user("hello " * 5_000)], window=4_000, max_tokens=256)
    assert [v.kind for v in check_request(request)] == [ViolationKind.context_overflow]
