"""The adapters against the SDKs' own types: request bodies checked against their
request TypedDicts, answers built with their response models (ChatCompletion,
Message), and the new stop, refusal, usage, capability and served-model rules."""

from __future__ import annotations

import email.utils
import json
import time

import httpx2
import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai._utils import transform as openai_transform
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from sdk_types import problems

from agentsteps.activities.llm.providers import anthropic as anthropic_wire
from agentsteps.activities.llm.providers import classify_response, parse_retry_after
from agentsteps.activities.llm.providers import openai as openai_wire
from agentsteps.contracts import LLMConfig, LLMRequest, LLMToolCall, Message, ResponseFormat, ToolSchema
from agentsteps.contracts.errors import NonRetryableProviderError, RetryableProviderError
from agentsteps.contracts.llm.capabilities import ModelCapability, capability_for, check_capabilities
from agentsteps.contracts.llm.postconditions import check_response, served_model_matches
from agentsteps.contracts.violations import ViolationKind as K

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

WEATHER = ToolSchema(
    name="get_weather",
    description="Weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


def _request(provider: str, model: str, **kwargs) -> LLMRequest:
    messages = kwargs.pop("messages", None) or [
        Message.system("Be brief."),
        Message.user("Weather?"),
        Message(
            role="assistant",
            tool_calls=[
                LLMToolCall(id="c1", name="get_weather", arguments='{"city": "Oslo"}'),
                LLMToolCall(id="c2", name="get_weather", arguments=""),
            ],
        ),
        Message(role="tool", tool_call_id="c1", content="sunny"),
        Message(role="tool", tool_call_id="c2", content="bad", is_error=True),
        # A re-prompt after an empty answer: the empty assistant turn must not reach the wire.
        Message(role="assistant", content=None),
        Message.user("Your previous answer broke the response contract."),
    ]
    config = LLMConfig(provider=provider, model=model, max_tokens=64, **kwargs.pop("config", {}))
    return LLMRequest(config=config, messages=messages, tools=[WEATHER], **kwargs)


# ------------------------------------------------------------------ requests vs the SDKs' TypedDicts


@pytest.mark.parametrize("fmt", [None, ResponseFormat(json_schema=SCHEMA)])
@pytest.mark.parametrize("model", ["gpt-4o-2024-08-06", "o3-2025-04-16", "llama3.1:8b"])
def test_openai_request_is_a_valid_sdk_request(fmt, model):
    body = openai_wire.request_to_wire(_request("openai", model, response_format=fmt))
    assert problems(body, CompletionCreateParamsNonStreaming) == []
    assert "max_tokens" not in body and body["max_completion_tokens"] == 64
    assert all(m["role"] != "assistant" or m.get("content") or m.get("tool_calls") for m in body["messages"])


@pytest.mark.parametrize("fmt", [None, ResponseFormat(json_schema=SCHEMA)])
def test_openai_request_is_what_the_sdk_transform_would_send(fmt):
    # The provider posts these params without chat.completions.create (whose
    # transform costs O(messages x union members)): safe only while it is an identity.
    body = openai_wire.request_to_wire(_request("openai", "gpt-4o-2024-08-06", response_format=fmt))
    assert openai_transform(body, CompletionCreateParamsNonStreaming) == body


@pytest.mark.parametrize("fmt", [None, ResponseFormat(json_schema=SCHEMA)])
@pytest.mark.parametrize("model", ["claude-sonnet-4-20250514", "claude-sonnet-4-5-20250929", "claude-opus-5-20270101"])
def test_anthropic_request_is_a_valid_sdk_request(fmt, model):
    params, extra = anthropic_wire.request_to_wire(_request("anthropic", model, response_format=fmt))
    assert problems(params, MessageCreateParamsNonStreaming) == []
    assert set(extra) <= {"temperature"}
    for message in params["messages"]:
        assert message["content"], "the API rejects an empty content list"
        assert all(b.get("text") != "" for b in message["content"])
    blank = params["messages"][1]["content"][1]
    assert blank["type"] == "tool_use" and blank["input"] == {}  # blank arguments are "no arguments"
    capability = capability_for("anthropic", model)
    if fmt is not None:
        assert ("output_config" in params) is capability.structured_output
        assert (json.dumps(SCHEMA) in params["system"][0]["text"]) is not capability.structured_output


@pytest.mark.parametrize(
    ("provider", "model", "temperature", "kind", "sent"),
    [
        ("openai", "gpt-4o-2024-08-06", 0.3, None, True),
        ("openai", "o3-2025-04-16", 0.3, K.temperature_unsupported, False),
        ("openai", "gpt-5-2025-08-07", 0.3, K.temperature_unsupported, False),
        ("anthropic", "claude-sonnet-4-20250514", 0.9, None, True),
        ("anthropic", "claude-sonnet-4-20250514", 1.5, K.temperature_out_of_range, True),
        ("anthropic", "claude-opus-5-20270101", 0.2, K.temperature_unsupported, False),
    ],
)
def test_temperature_is_sent_only_where_accepted_and_never_changed(provider, model, temperature, kind, sent):
    request = _request(provider, model, config={"temperature": temperature})
    capability = capability_for(provider, model)
    violations = check_capabilities(request, capability)
    assert [v.kind for v in violations] == ([kind] if kind else [])
    if provider == "openai":
        body = openai_wire.request_to_wire(request, capability)
    else:
        _, body = anthropic_wire.request_to_wire(request, capability)
    assert body.get("temperature") == (temperature if sent else None)


def test_unset_temperature_is_never_sent_and_operator_rows_win():
    request = _request("openai", "o3-2025-04-16")
    assert "temperature" not in openai_wire.request_to_wire(request)
    own = [ModelCapability(provider="openai", pattern="o3-*", temperature=True)]
    assert (
        check_capabilities(
            _request("openai", "o3-2025-04-16", config={"temperature": 1}),
            capability_for("openai", "o3-2025-04-16", own),
        )
        == []
    )


# ------------------------------------------------------------------ answers built with the SDKs' models


def _completion(message: dict, finish: str = "stop", usage: dict | None = None, model: str = "gpt-4o-2024-08-06"):
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
    ).model_dump(mode="json", exclude_none=True)


def _message(content: list, stop: str | None = "end_turn", usage: dict | None = None, **extra):
    return AnthropicMessage.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 10, "output_tokens": 2},
            **extra,
        }
    ).model_dump(mode="json", exclude_none=True)


def test_openai_parallel_tool_calls_and_cache_and_reasoning_usage():
    body = _completion(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "X"}'},
                }
                for i in range(3)
            ],
        },
        "tool_calls",
        {
            "prompt_tokens": 2000,
            "completion_tokens": 50,
            "total_tokens": 2050,
            "prompt_tokens_details": {"cached_tokens": 1536},
            "completion_tokens_details": {"reasoning_tokens": 30},
        },
    )
    response = openai_wire.response_from_wire(body, _request("openai", "gpt-4o-2024-08-06"))
    assert [c.id for c in response.tool_calls] == ["call_0", "call_1", "call_2"]
    assert (response.usage.cache_read_tokens, response.usage.reasoning_tokens) == (1536, 30)


def test_openai_refusal_keeps_its_text_and_is_a_refusal_violation():
    request = _request("openai", "gpt-4o-2024-08-06")
    response = openai_wire.response_from_wire(_completion({"content": None, "refusal": "I can't help."}), request)
    assert response.refusal == "I can't help."
    [violation] = check_response(request, response)
    assert violation.kind is K.refusal and "I can't help." in violation.message


@pytest.mark.parametrize(
    ("finish", "kind"),
    [("length", K.truncated), ("content_filter", K.content_filtered), ("stop", None), ("tool_calls", None)],
)
def test_openai_stop_reasons(finish, kind):
    request = _request("openai", "gpt-4o-2024-08-06")
    message = (
        {"content": "partial"}
        if finish != "tool_calls"
        else {
            "content": None,
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        }
    )
    violations = check_response(request, openai_wire.response_from_wire(_completion(message, finish), request))
    assert [v.kind for v in violations] == ([kind] if kind else [])


@pytest.mark.parametrize(
    ("stop", "kind"),
    [
        ("end_turn", None),
        ("stop_sequence", None),
        ("max_tokens", K.truncated),
        ("model_context_window_exceeded", K.truncated),
        ("pause_turn", K.incomplete),
        ("refusal", K.refusal),
    ],
)
def test_anthropic_every_stop_reason(stop, kind):
    request = _request("anthropic", "claude-sonnet-4-20250514")
    extra = {"stop_details": {"type": "refusal", "explanation": "Not this."}} if stop == "refusal" else {}
    body = _message([{"type": "text", "text": "partial"}], stop, **extra)
    response = anthropic_wire.response_from_wire(body, request)
    violations = check_response(request, response)
    assert [v.kind for v in violations] == ([kind] if kind else [])
    if kind is K.refusal:
        assert response.refusal == "Not this." and "Not this." in violations[0].message


def test_anthropic_thinking_blocks_cache_usage_and_parallel_tool_use():
    body = _message(
        [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "A"}},
            {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "B"}},
        ],
        "tool_use",
        {
            "input_tokens": 5,
            "output_tokens": 40,
            "cache_read_input_tokens": 900,
            "cache_creation_input_tokens": 100,
            "output_tokens_details": {"thinking_tokens": 25},
        },
    )
    response = anthropic_wire.response_from_wire(body, _request("anthropic", "claude-sonnet-4-20250514"))
    assert response.message.content is None and [c.id for c in response.tool_calls] == ["t1", "t2"]
    u = response.usage
    assert (u.prompt_tokens, u.cache_read_tokens, u.cache_write_tokens, u.reasoning_tokens) == (1005, 900, 100, 25)


@pytest.mark.parametrize(
    ("pinned", "served", "ok"),
    [
        ("gpt-4o-2024-08-06", "gpt-4o-2024-08-06", True),
        ("gpt-4o", "gpt-4o-2024-08-06", True),
        ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", True),
        ("gpt-4o-2024-08-06", "deepseek-v3", False),
        ("gpt-4o", "gpt-4o-mini-2024-07-18", False),
        ("mymodel:prod", "mymodel:dev", False),
        ("gpt-4o-2024-08-06", "", True),
    ],
)
def test_served_model_rule(pinned, served, ok):
    assert served_model_matches(pinned, served) is ok


def test_served_model_mismatch_is_a_violation():
    request = _request("openai", "gpt-4o-2024-08-06")
    response = openai_wire.response_from_wire(_completion({"content": "hi"}, model="deepseek-v3"), request)
    assert [v.kind for v in check_response(request, response)] == [K.served_model]


# ------------------------------------------------------------------ Retry-After and x-should-retry, hostile values


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3600", 120.0),
        ("1e308", 120.0),
        ("nan", None),
        ("inf", None),
        ("-inf", None),
        ("5", 5.0),
        ("", None),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 120.0),
        ("Mon, 99 Foo 2024 99:99:99 GMT", None),
        ("\x00\x01", None),
    ],
)
def test_retry_after_is_capped_and_hostile_values_are_ignored(value, expected):
    assert parse_retry_after({"Retry-After": value}) == expected


def test_retry_after_cap_is_configurable_and_http_date_counts_from_now():
    when = email.utils.formatdate(time.time() + 600, usegmt=True)
    assert parse_retry_after({"Retry-After": when}, cap=1000) == pytest.approx(600, abs=2)
    assert parse_retry_after({"Retry-After": when}, cap=30) == 30


@pytest.mark.parametrize(
    ("status", "header", "retryable"),
    [(400, "true", True), (500, "false", False), (429, None, True), (409, "TRUE", True), (503, "maybe", True)],
)
def test_x_should_retry_overrides_the_status_rule(status, header, retryable):
    headers = {"x-should-retry": header} if header is not None else {}
    error = classify_response("openai", httpx2.Response(status, headers=headers, json={"error": {"message": "m"}}))
    assert isinstance(error, RetryableProviderError if retryable else NonRetryableProviderError)
