"""A re-prompt is always a valid request for the provider it goes to.

For each provider and each kind of bad answer (empty, refused, bad tool
calls), the answer is built with the SDK's own response model, parsed by the
adapter, judged by the postcondition, turned into the re-prompt the ladder
sends, and the next request body is checked twice: against the SDK's request
``TypedDict`` (tests/support/sdk_types.py) and against the API's rules the types do
not express (no empty assistant turn, no empty content list or text block,
every tool result answering a call of the turn before, safe tool names).
"""

from __future__ import annotations

import re

import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from sdk_types import problems

from agentsteps.activities.llm.providers import anthropic as anthropic_wire
from agentsteps.activities.llm.providers import openai as openai_wire
from agentsteps.contracts import LLMConfig, LLMRequest, LLMToolCall, Message, ToolSchema
from agentsteps.contracts.llm.call_ids import with_engine_call_ids
from agentsteps.contracts.llm.postconditions import check_response
from agentsteps.contracts.llm.preconditions import check_request
from agentsteps.contracts.llm.reprompt import reprompt_messages

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MODELS = {"openai": "gpt-4o-2024-08-06", "anthropic": "claude-sonnet-4-5-20250929"}
TOOLS = [
    ToolSchema(
        name="get_weather",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolSchema(name="tickets.search", parameters={"type": "object", "properties": {"q": {"type": "string"}}}),
]
# Calls a model gets wrong: bad JSON, blank, a non-object, schema mismatch, an unknown dotted name, a reused id.
BAD_CALLS = [
    ("call_0", "get_weather", "{not json"),
    ("call_1", "tickets_search", ""),
    ("call_2", "get_weather", "[1, 2]"),
    ("call_3", "get_weather", '{"town": "Paris"}'),
    ("call_4", "launch.missiles", "{}"),
    ("call_0", "get_weather", '{"city": "Oslo"}'),
]


def _openai_answer(kind: str) -> dict:
    message: dict = {"role": "assistant", "content": None}
    finish = "stop"
    if kind == "refusal":
        message["refusal"] = "I can't help with that."
    elif kind == "bad_tool_calls":
        finish = "tool_calls"
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in BAD_CALLS
        ]
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": MODELS["openai"],
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
    ).model_dump(mode="json", exclude_none=True)


def _anthropic_answer(kind: str) -> dict:
    content: list = []
    stop, extra = "end_turn", {}
    if kind == "refusal":
        stop, extra = (
            "refusal",
            {"stop_details": {"type": "refusal", "category": None, "explanation": "I can't help with that."}},
        )
    elif kind == "bad_tool_calls":
        stop = "tool_use"
        content = [{"type": "text", "text": "Calling tools."}] + [
            {"type": "tool_use", "id": i, "name": n, "input": {}} for i, n, _ in BAD_CALLS
        ]
    body = AnthropicMessage.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": MODELS["anthropic"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2},
            **extra,
        }
    ).model_dump(mode="json", exclude_none=True)
    if kind == "bad_tool_calls":
        # A compatible server passing the model's broken text through: the adapter keeps it for the postcondition.
        for block, (_, _, arguments) in zip(body["content"][1:], BAD_CALLS):
            block["input"] = arguments
    return body


def _history() -> list[Message]:
    # An earlier turn already used call_0, as servers numbering calls per answer do.
    return [
        Message.system("Be brief."),
        Message.user("Weather in Paris?"),
        Message(
            role="assistant", tool_calls=[LLMToolCall(id="call_0", name="get_weather", arguments='{"city": "Paris"}')]
        ),
        Message(role="tool", tool_call_id="call_0", name="get_weather", content='{"sky": "clear"}'),
    ]


def _next_request(provider: str, kind: str) -> LLMRequest:
    history = _history()
    request = LLMRequest(
        config=LLMConfig(provider=provider, model=MODELS[provider], max_tokens=256), messages=history, tools=TOOLS
    )
    if provider == "openai":
        response = openai_wire.response_from_wire(_openai_answer(kind), request)
    else:
        response = anthropic_wire.response_from_wire(_anthropic_answer(kind), request)
    # What llm.call does: engine ids, then the postcondition.
    response = response.model_copy(update={"message": with_engine_call_ids(response.message, history)})
    violations = check_response(request, response)
    expected = {
        "empty": {"empty_response"},
        "refusal": {"refusal"},
        "bad_tool_calls": {"tool_arguments_not_json", "tool_arguments_invalid", "unknown_tool"},
    }[kind]
    assert expected <= {v.kind.value for v in violations}
    return request.model_copy(update={"messages": [*history, *reprompt_messages(response.message, violations)]})


def _openai_rule_breaks(body: dict) -> list[str]:
    out, open_calls = [], set()
    for i, m in enumerate(body["messages"]):
        if m["role"] == "assistant":
            if not m.get("content") and not m.get("tool_calls"):
                out.append(f"messages[{i}]: assistant with neither content nor tool calls")
            open_calls = {c["id"] for c in m.get("tool_calls", [])}
            out += [
                f"messages[{i}]: tool name {c['function']['name']!r}"
                for c in m.get("tool_calls", [])
                if not API_NAME.match(c["function"]["name"])
            ]
        elif m["role"] == "tool":
            if m["tool_call_id"] not in open_calls:
                out.append(f"messages[{i}]: tool result for {m['tool_call_id']!r} answers no call of the turn before")
        else:
            open_calls = set()
    return out


def _anthropic_rule_breaks(body: dict) -> list[str]:
    out, roles, asked = [], [m["role"] for m in body["messages"]], set()
    if roles[:1] != ["user"] or any(a == b for a, b in zip(roles, roles[1:])):
        out.append(f"roles must start with user and alternate: {roles}")
    for i, m in enumerate(body["messages"]):
        if not m["content"]:
            out.append(f"messages[{i}]: empty content")
        out += [f"messages[{i}]: empty text block" for b in m["content"] if b.get("type") == "text" and not b["text"]]
        uses = {b["id"] for b in m["content"] if b.get("type") == "tool_use"}
        results = {b["tool_use_id"] for b in m["content"] if b.get("type") == "tool_result"}
        if results - asked:
            out.append(f"messages[{i}]: tool results {sorted(results - asked)} answer no call of the turn before")
        if m["role"] == "user" and asked - results:
            out.append(f"messages[{i}]: calls {sorted(asked - results)} left unanswered")
        out += [
            f"messages[{i}]: tool name {b['name']!r}"
            for b in m["content"]
            if b.get("type") == "tool_use" and not API_NAME.match(b["name"])
        ]
        out += [
            f"messages[{i}]: input of {b['id']} is not an object"
            for b in m["content"]
            if b.get("type") == "tool_use" and not isinstance(b["input"], dict)
        ]
        asked = uses
    return out


@pytest.mark.parametrize("kind", ["empty", "refusal", "bad_tool_calls"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_reprompt_is_a_valid_request_for_its_provider(provider, kind):
    request = _next_request(provider, kind)
    assert check_request(request) == []  # the engine's own precondition holds too
    if provider == "openai":
        body = openai_wire.request_to_wire(request)
        assert problems(body, CompletionCreateParamsNonStreaming) == []
        assert _openai_rule_breaks(body) == []
        last = body["messages"][-1]
    else:
        body, _ = anthropic_wire.request_to_wire(request)
        assert problems(body, MessageCreateParamsNonStreaming) == []
        assert _anthropic_rule_breaks(body) == []
        last = body["messages"][-1]
    # The model reads the violation report last.
    assert "broke the response contract" in str(last)


def test_the_rule_checks_catch_what_the_old_wire_sent():
    # The shapes issue 12 found: an empty assistant turn, and an empty Anthropic content list.
    assert _openai_rule_breaks({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None}]})
    assert _anthropic_rule_breaks(
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "x"}]},
                {"role": "assistant", "content": []},
            ]
        }
    )
