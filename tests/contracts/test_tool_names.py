"""Tool names and tool-call ids between the engine and the provider APIs.

Names: sent in their API-safe form, mapped back through the request's table;
pairs that would share a wire name or a code-mode function are refused at
start. Ids: unique per run in the engine's history whatever the model sends,
the provider's own id sent back on the wire. Bodies are checked against the
SDKs' request types.
"""

from __future__ import annotations

import json
import re

import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import BaseModel
from sdk_types import problems

from agentsteps.activities.llm.providers import anthropic as anthropic_wire
from agentsteps.activities.llm.providers import openai as openai_wire
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import LLMConfig, LLMRequest, LLMToolCall, Message, ToolSchema
from agentsteps.contracts.errors import ToolConfigError
from agentsteps.contracts.llm.call_ids import with_engine_call_ids
from agentsteps.contracts.llm.preconditions import check_request
from agentsteps.contracts.tool_names import API_TOOL_NAME, api_tool_name, tool_name_collisions

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

API = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # both APIs' documented pattern, spelt out independently
SEARCH = ToolSchema(name="tickets.search", parameters={"type": "object", "properties": {"q": {"type": "string"}}})
WEATHER = ToolSchema(name="get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})


# ------------------------------------------------------------------ the name mapping


def test_safe_names_are_sent_as_they_are_and_dots_become_underscores():
    assert api_tool_name("get_weather") == "get_weather"
    assert api_tool_name("get-weather") == "get-weather"
    assert api_tool_name("tickets.search") == "tickets_search"
    assert API_TOOL_NAME.pattern == API.pattern


@pytest.mark.parametrize(
    "name", ["", " ", "a.b.c", "naïve", "x" * 65, "a" * 64 + ".", "tool\nname", "{}", "😀" * 40, "a/b:c@d", "." * 300]
)
def test_any_name_a_model_may_echo_becomes_an_api_safe_name(name):
    assert API.match(api_tool_name(name))


def test_long_names_that_differ_only_past_the_cut_stay_distinct():
    assert api_tool_name("x" * 70 + ".a") != api_tool_name("x" * 70 + ".b")


@pytest.mark.parametrize(
    ("names", "spelt"),
    [
        (["get.sum", "get_sum"], "API tool name 'get_sum'"),
        (["get-sum", "get_sum"], "code-mode function name 'get_sum'"),
        (["print", "print_"], "code-mode function name 'print_'"),  # a builtin's stub gets a trailing _
        (["a.b", "a-b", "a_b"], "'a.b', 'a-b', 'a_b'"),
    ],
)
def test_names_that_would_become_one_are_reported_naming_each(names, spelt):
    problems_found = tool_name_collisions(names)
    assert problems_found and any(spelt in p for p in problems_found)
    assert all(repr(n) in " ".join(problems_found) for n in names)


def test_distinct_names_and_repeats_of_one_name_are_fine():
    assert tool_name_collisions(["get_weather", "send_notification", "tickets.search", "get_weather"]) == []


class _Args(BaseModel):
    x: int = 0


@pytest.mark.parametrize(("first", "second"), [("get_sum", "get-sum"), ("get_sum", "get.sum"), ("get.sum", "get-sum")])
def test_registering_a_colliding_python_tool_fails_at_start_typed(first, second):
    registry = ToolRegistry()

    @registry.tool(first)
    def one(args: _Args) -> _Args:
        return args

    with pytest.raises(ToolConfigError) as err:

        @registry.tool(second)
        def two(args: _Args) -> _Args:
            return args

    assert first in str(err.value) and second in str(err.value)
    assert len(registry) == 1


# ------------------------------------------------------------------ names on the wire, both providers


def _history_request(provider: str, **kwargs) -> LLMRequest:
    model = "claude-sonnet-4-5-20250929" if provider == "anthropic" else "gpt-4o-2024-08-06"
    messages = kwargs.pop("messages", None) or [
        Message.system("Be brief."),
        Message.user("find it"),
        Message(role="assistant", tool_calls=[LLMToolCall(id="c1", name="tickets.search", arguments='{"q": "x"}')]),
        Message(role="tool", tool_call_id="c1", name="tickets.search", content="[]"),
    ]
    return LLMRequest(
        config=LLMConfig(provider=provider, model=model, max_tokens=64),
        messages=messages,
        tools=[SEARCH, WEATHER],
        **kwargs,
    )


def _wire_tool_names(provider: str, body: dict) -> list[str]:
    if provider == "openai":
        names = [t["function"]["name"] for t in body["tools"]]
        return names + [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls", [])]
    names = [t["name"] for t in body["tools"]]
    return names + [b["name"] for m in body["messages"] for b in m["content"] if b.get("type") == "tool_use"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tools_and_history_go_out_under_api_safe_names(provider):
    request = _history_request(provider)
    if provider == "openai":
        body = openai_wire.request_to_wire(request)
        assert problems(body, CompletionCreateParamsNonStreaming) == []
    else:
        body, _ = anthropic_wire.request_to_wire(request)
        assert problems(body, MessageCreateParamsNonStreaming) == []
    names = _wire_tool_names(provider, body)
    assert names == ["tickets_search", "get_weather", "tickets_search"]
    assert all(API.match(n) for n in names)


def _openai_answer(*calls: tuple[str, str]) -> dict:
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}} for i, n in calls
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).model_dump(mode="json", exclude_none=True)


def _anthropic_answer(*calls: tuple[str, str]) -> dict:
    return AnthropicMessage.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "tool_use", "id": i, "name": n, "input": {}} for i, n in calls],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    ).model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_answers_api_names_are_mapped_back_and_unknown_ones_kept_for_the_postcondition(provider):
    calls = [("a", "tickets_search"), ("b", "get_weather"), ("c", "launch_missiles")]
    if provider == "openai":
        response = openai_wire.response_from_wire(_openai_answer(*calls), _history_request(provider))
    else:
        response = anthropic_wire.response_from_wire(_anthropic_answer(*calls), _history_request(provider))
    assert [c.name for c in response.message.tool_calls] == ["tickets.search", "get_weather", "launch_missiles"]


# ------------------------------------------------------------------ engine-unique call ids


def test_a_reused_call_id_gets_an_engine_id_and_keeps_the_providers():
    history = [
        Message.user("go"),
        Message(role="assistant", tool_calls=[LLMToolCall(id="call_0", name="get_weather")]),
        Message(role="tool", tool_call_id="call_0", content="sunny"),
    ]
    answer = Message(
        role="assistant",
        tool_calls=[
            LLMToolCall(id="call_0", name="get_weather"),  # reused from the last turn
            LLMToolCall(id="call_0", name="get_weather"),  # and twice in this answer
            LLMToolCall(id="", name="get_weather"),  # and none at all
            LLMToolCall(id="fresh", name="get_weather"),
        ],
    )
    renamed = with_engine_call_ids(answer, history)
    ids = [c.id for c in renamed.tool_calls]
    assert len(set(ids)) == 4 and "call_0" not in ids and ids[3] == "fresh"
    assert [c.provider_id for c in renamed.tool_calls] == ["call_0", "call_0", "", None]
    # With the engine's ids the next request meets the pairing precondition.
    next_history = [*history, renamed, *(Message(role="tool", tool_call_id=i, content="ok") for i in ids)]
    request = LLMRequest(
        config=LLMConfig(model="gpt-4o-2024-08-06", max_tokens=64), messages=next_history, tools=[WEATHER]
    )
    assert check_request(request) == []


def test_unique_ids_are_left_alone():
    answer = Message(role="assistant", tool_calls=[LLMToolCall(id="toolu_1", name="get_weather")])
    assert with_engine_call_ids(answer, [Message.user("go")]) is answer


def test_engine_ids_never_collide_with_ids_already_in_the_run():
    history = [
        Message(role="assistant", tool_calls=[LLMToolCall(id="call_1_0", name="x"), LLMToolCall(id="d", name="x")]),
        Message(role="tool", tool_call_id="call_1_0", content=""),
        Message(role="tool", tool_call_id="d", content=""),
    ]
    renamed = with_engine_call_ids(Message(role="assistant", tool_calls=[LLMToolCall(id="d", name="x")]), history)
    assert renamed.tool_calls[0].id not in {"call_1_0", "d"}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_renamed_calls_and_their_results_go_out_under_the_engines_unique_id(provider):
    first = LLMToolCall(id="call_0", name="get_weather", arguments="{}")
    second = LLMToolCall(id="call_2_0", name="get_weather", arguments="{}", provider_id="call_0")
    messages = [
        Message.user("go"),
        Message(role="assistant", tool_calls=[first]),
        Message(role="tool", tool_call_id="call_0", content="a"),
        Message(role="assistant", tool_calls=[second]),
        Message(role="tool", tool_call_id="call_2_0", content="b"),
    ]
    request = _history_request(provider, messages=messages)
    assert check_request(request) == []
    if provider == "openai":
        body = openai_wire.request_to_wire(request)
        assert problems(body, CompletionCreateParamsNonStreaming) == []
        sent = [
            (m["role"], m.get("tool_call_id") or [c["id"] for c in m.get("tool_calls", [])]) for m in body["messages"]
        ]
        assert sent[1:] == [
            ("assistant", ["call_0"]),
            ("tool", "call_0"),
            ("assistant", ["call_2_0"]),
            ("tool", "call_2_0"),
        ]
    else:
        body, _ = anthropic_wire.request_to_wire(request)
        assert problems(body, MessageCreateParamsNonStreaming) == []
        ids = [b.get("id") or b.get("tool_use_id") for m in body["messages"] for b in m["content"] if "text" not in b]
        assert ids == ["call_0", "call_0", "call_2_0", "call_2_0"], "each tool_use id once, each result naming it"
