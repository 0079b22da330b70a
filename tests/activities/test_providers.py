"""Providers over real HTTP against the scripted server, plus unit cases of error classification."""

from __future__ import annotations

import email.utils
import json
import socket
import time

import httpx2
import pytest
from pydantic import SecretStr

from agentsteps.activities.llm.providers import (
    AnthropicProvider,
    OpenAIProvider,
    classify_exception,
    classify_response,
    parse_retry_after,
)
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.contracts import (
    LLMConfig,
    LLMRequest,
    LLMToolCall,
    Message,
    NonRetryableProviderError,
    ResponseFormat,
    RetryableProviderError,
    ToolSchema,
)
from agentsteps.scripted_model import ScriptedModelServer

KEY = "sk-test-a1b2c3d4e5f6"
WEATHER = ToolSchema(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
WIRES = ["openai", "anthropic"]


def provider_for(
    wire: str,
    server: ScriptedModelServer,
    http: httpx2.AsyncClient,
    *,
    key: str | None = KEY,
    timeout: float | None = None,
):
    if wire == "openai":
        return OpenAIProvider(
            http, base_url=server.url_openai, api_key=SecretStr(key) if key else None, timeout=timeout
        )
    return AnthropicProvider(
        http, base_url=server.url_anthropic, api_key=SecretStr(key) if key else None, timeout=timeout
    )


def request(*messages: Message, **kwargs) -> LLMRequest:
    config = kwargs.pop("config", LLMConfig(model="scripted-v1", provider="openai"))
    return LLMRequest(config=config, messages=list(messages), **kwargs)


# ------------------------------------------------------------------ wire formats, end to end


async def test_openai_tool_round_trip_uses_chat_completions_wire_shape(server, http):
    server.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                },
                {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "Sunny in Paris."}},
            ]
        }
    )
    provider = provider_for("openai", server, http)
    req = request(
        Message.system("Be brief."), Message.user("Weather in Paris?"), tools=[WEATHER], tool_choice="required"
    )
    first = await provider.complete(req)
    assert first.finish_reason == "tool_calls"
    [call] = first.tool_calls
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}

    req.messages += [first.message, Message(role="tool", tool_call_id=call.id, name="get_weather", content="sunny")]
    second = await provider.complete(req)
    assert second.message.content == "Sunny in Paris." and second.finish_reason == "stop"

    sent = server.requests[1]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": WEATHER.parameters},
        }
    ]
    assert body["tool_choice"] == "required"
    assert body["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.arguments}}
        ],
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
    # max_tokens is deprecated (reasoning models reject it); an unset temperature is not sent.
    assert body["max_completion_tokens"] == 1024 and "max_tokens" not in body and "temperature" not in body


async def test_anthropic_tool_round_trip_groups_tool_results_and_separates_system(server, http):
    server.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "content": "Checking both.",
                        "tool_calls": [
                            {"name": "get_weather", "arguments": {"city": "Paris"}},
                            {"name": "get_weather", "arguments": {"city": "Oslo"}},
                        ],
                    },
                },
                {
                    "match": {"role": "tool", "tool_result_for": "get_weather"},
                    "reply": {"content": "Paris sunny, Oslo n/a."},
                },
            ]
        }
    )
    provider = provider_for("anthropic", server, http)
    req = request(
        Message.system("Be brief."),
        Message.user("Weather?"),
        tools=[WEATHER],
        tool_choice="required",
        config=LLMConfig(model="claude-sonnet-4-20250514", provider="anthropic", temperature=0.5),
    )
    first = await provider.complete(req)
    assert first.message.content == "Checking both."
    assert [json.loads(c.arguments)["city"] for c in first.tool_calls] == ["Paris", "Oslo"]
    assert first.finish_reason == "tool_calls" and first.provider == "anthropic"

    a, b = first.tool_calls
    req.messages += [
        first.message,
        Message(role="tool", tool_call_id=a.id, name=a.name, content="sunny"),
        Message(role="tool", tool_call_id=b.id, name=b.name, content="station offline", is_error=True),
    ]
    second = await provider.complete(req)
    assert second.message.content == "Paris sunny, Oslo n/a."

    sent = server.requests[1]
    assert sent.path == "/v1/messages"
    # The SDK authenticates with a bearer token and sends its own pinned API version.
    assert sent.headers["authorization"] == f"Bearer {KEY}" and sent.headers["anthropic-version"]
    body = sent.body
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert body["temperature"] == 0.5  # claude-sonnet-4 takes one: sent as it is
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "input_schema": WEATHER.parameters,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert body["tool_choice"] == {"type": "any"}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": a.id,
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": a.id, "content": "sunny"},
        {
            "type": "tool_result",
            "tool_use_id": b.id,
            "content": "station offline",
            "is_error": True,
            "cache_control": {"type": "ephemeral"},
        },
    ]


@pytest.mark.parametrize(("choice", "expected"), [("auto", {"type": "auto"}), ("none", {"type": "none"})])
async def test_anthropic_tool_choice_mapping(server, http, choice, expected):
    server.set_script({"default": {"content": "ok"}})
    await provider_for("anthropic", server, http).complete(
        request(Message.user("hi"), tools=[WEATHER], tool_choice=choice)
    )
    assert server.requests[-1].body["tool_choice"] == expected


async def test_no_tools_means_no_tool_fields_sent(server, http):
    server.set_script({"default": {"content": "ok"}})
    for wire in WIRES:
        await provider_for(wire, server, http).complete(request(Message.user("hi")))
    for sent in server.requests:
        assert "tools" not in sent.body and "tool_choice" not in sent.body


async def test_json_response_format_is_requested_in_each_wire_format(server, http):
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    server.set_script({"default": {"json": {"answer": 42}}})
    req = request(
        Message.system("Solve it."),
        Message.user("6*7?"),
        response_format=ResponseFormat(name="solution", json_schema=schema),
    )
    for wire in WIRES:
        response = await provider_for(wire, server, http).complete(req)
        assert json.loads(response.message.content) == {"answer": 42}
    openai_body, anthropic_body = (r.body for r in server.requests)
    assert openai_body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "solution", "schema": schema, "strict": False},
    }
    # scripted-v1 is not known to take output_config.format: the instruction fallback is used.
    assert "response_format" not in anthropic_body and "output_config" not in anthropic_body
    [system] = anthropic_body["system"]
    assert system["text"].startswith("Solve it.\n\n") and json.dumps(schema) in system["text"]


async def test_usage_is_mapped_and_inconsistent_totals_are_kept_for_the_postcondition(server, http):
    server.set_script(
        {"default": {"content": "x", "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 99}}}
    )
    openai = await provider_for("openai", server, http).complete(request(Message.user("hi")))
    assert (openai.usage.prompt_tokens, openai.usage.completion_tokens, openai.usage.total_tokens) == (10, 5, 99)
    anthropic = await provider_for("anthropic", server, http).complete(request(Message.user("hi")))
    assert (anthropic.usage.prompt_tokens, anthropic.usage.completion_tokens, anthropic.usage.total_tokens) == (
        10,
        5,
        15,
    )


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("scripted", "expected"),
    [
        ("length", "length"),
        ("stop", "stop"),
        ("tool_calls", "tool_calls"),
    ],
)
async def test_finish_reasons_are_mapped(server, http, wire, scripted, expected):
    server.set_script({"default": {"content": "partial", "finish_reason": scripted}})
    response = await provider_for(wire, server, http).complete(request(Message.user("hi")))
    assert response.finish_reason == expected


@pytest.mark.parametrize("wire", WIRES)
async def test_invalid_tool_arguments_are_kept_as_raw_text(server, http, wire):
    server.set_script({"default": {"tool_calls": [{"name": "get_weather", "arguments": '{"city": Par'}]}})
    response = await provider_for(wire, server, http).complete(request(Message.user("hi"), tools=[WEATHER]))
    assert response.tool_calls[0].arguments == '{"city": Par'


async def test_openai_provider_without_key_sends_no_authorization(server, http):
    server.set_script({"default": {"content": "ok"}})
    await provider_for("openai", server, http, key=None).complete(request(Message.user("hi")))
    assert "authorization" not in server.requests[-1].headers


async def test_anthropic_history_with_unparseable_arguments_is_still_sent_as_an_object(server, http):
    server.set_script({"default": {"content": "ok"}})
    bad = LLMToolCall(id="t1", name="get_weather", arguments="{oops")
    req = request(
        Message.user("hi"),
        Message(role="assistant", tool_calls=[bad]),
        Message(role="tool", tool_call_id="t1", content="error: bad arguments", is_error=True),
        Message.user("try again"),
        tools=[WEATHER],
    )
    await provider_for("anthropic", server, http).complete(req)
    messages = server.requests[-1].body["messages"]
    assert messages[1]["content"][0]["input"] == {"_raw_arguments": "{oops"}
    assert messages[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # The re-prompt joins the tool results in the same user turn, after them.
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text"]


# ------------------------------------------------------------------ errors, end to end


@pytest.mark.parametrize("wire", WIRES)
async def test_429_with_retry_after_seconds_is_retryable_with_the_delay(server, http, wire):
    server.set_script({"default": {"fault": {"status": 429, "retry_after": "3", "message": "rate limited"}}})
    with pytest.raises(RetryableProviderError) as err:
        await provider_for(wire, server, http).complete(request(Message.user("hi")))
    assert err.value.status == 429 and err.value.retry_after == 3.0
    assert "rate limited" in str(err.value)


async def test_429_with_retry_after_http_date_is_parsed(server, http):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    server.set_script({"default": {"fault": {"status": 429, "retry_after": when}}})
    with pytest.raises(RetryableProviderError) as err:
        await provider_for("openai", server, http).complete(request(Message.user("hi")))
    assert 25 <= err.value.retry_after <= 31


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("status", [500, 502, 503, 408, 409])
async def test_server_errors_are_retryable(server, http, wire, status):
    server.set_script({"default": {"fault": {"status": status, "message": "upstream broke"}}})
    with pytest.raises(RetryableProviderError) as err:
        await provider_for(wire, server, http).complete(request(Message.user("hi")))
    assert err.value.status == status and err.value.retry_after is None


@pytest.mark.parametrize("wire", WIRES)
async def test_slow_reply_past_the_timeout_is_retryable(server, http, wire):
    server.set_script({"default": {"content": "late", "delay_seconds": 1.0}})
    with pytest.raises(RetryableProviderError, match="ReadTimeout"):
        await provider_for(wire, server, http, timeout=0.2).complete(request(Message.user("hi")))


async def test_connection_refused_is_retryable(http):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = OpenAIProvider(http, base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
    with pytest.raises(RetryableProviderError, match="ConnectError"):
        await provider.complete(request(Message.user("hi")))


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_non_retryable_and_carry_the_provider_message(server, http, wire, status):
    server.set_script({"default": {"fault": {"status": status, "message": f"provider says no ({status})"}}})
    with pytest.raises(NonRetryableProviderError) as err:
        await provider_for(wire, server, http).complete(request(Message.user("hi")))
    assert err.value.status == status
    assert f"provider says no ({status})" in str(err.value)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    "raw",
    [
        "this is not json",
        "[1, 2, 3]",
        '{"choices": [], "content": 5}',
        '{"choices": [{"message": {"content": 7}}], "content": [{"type": "text", "text": 7}]}',
        '{"choices": [{"message": {"tool_calls": [{"function": {}}]}}], "content": [{"type": "tool_use", "input": {}}]}',  # noqa: E501
    ],
)
async def test_malformed_bodies_give_a_typed_error_not_a_crash(server, http, wire, raw):
    server.set_script({"default": {"raw_body": raw}})
    with pytest.raises(NonRetryableProviderError, match="malformed provider response"):
        await provider_for(wire, server, http).complete(request(Message.user("hi")))


@pytest.mark.parametrize("wire", WIRES)
async def test_api_key_echoed_by_the_provider_never_reaches_the_error(server, http, wire):
    server.set_script({"default": {"fault": {"status": 401, "message": f"Incorrect API key provided: {KEY}"}}})
    with pytest.raises(NonRetryableProviderError) as err:
        await provider_for(wire, server, http).complete(request(Message.user("hi")))
    assert KEY not in str(err.value) and KEY not in repr(err.value.args)
    assert "Incorrect API key provided: ***" in str(err.value)


async def test_malformed_body_echoing_the_key_is_redacted(server, http):
    server.set_script({"default": {"raw_body": f"<html>bad gateway for {KEY}</html>"}})
    with pytest.raises(NonRetryableProviderError) as err:
        await provider_for("openai", server, http).complete(request(Message.user("hi")))
    assert KEY not in str(err.value)


# ------------------------------------------------------------------ classification units (MockTransport)


def _all_subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _all_subclasses(sub)
    return out


def test_every_httpx_request_error_is_classified():
    req = httpx2.Request("POST", "http://x/")
    retryable = {httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError, httpx2.ProxyError}
    for exc_type in sorted(_all_subclasses(httpx2.RequestError) | {httpx2.RequestError}, key=lambda t: t.__name__):
        error = classify_exception("openai", exc_type("boom", request=req))
        expected = RetryableProviderError if issubclass(exc_type, tuple(retryable)) else NonRetryableProviderError
        assert type(error) is expected, exc_type


async def test_connection_reset_while_reading_is_retryable():
    def reset(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(reset)) as client:
        provider = OpenAIProvider(client, base_url="http://model.test/v1", api_key=KEY)
        with pytest.raises(RetryableProviderError, match="RemoteProtocolError"):
            await provider.complete(request(Message.user("hi")))


async def test_a_redirect_is_not_followed_and_is_non_retryable():
    def redirect(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(307, headers={"Location": "http://elsewhere/"})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(redirect)) as client:
        provider = AnthropicProvider(client, base_url="http://model.test", api_key=KEY)
        with pytest.raises(NonRetryableProviderError, match="HTTP 307"):
            await provider.complete(request(Message.user("hi")))


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"Retry-After": "-4"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({}, None),
    ],
)
def test_parse_retry_after(headers, expected):
    assert parse_retry_after(httpx2.Headers(headers)) == expected


def test_http_date_retry_after_counts_from_now():
    now = 1_700_000_000.0
    header = email.utils.formatdate(now + 60, usegmt=True)
    assert parse_retry_after(httpx2.Headers({"Retry-After": header}), now=now) == pytest.approx(60, abs=1)


def test_error_message_without_json_body_uses_the_text():
    error = classify_response("openai", httpx2.Response(403, text="forbidden by proxy"))
    assert isinstance(error, NonRetryableProviderError)
    assert str(error) == "openai HTTP 403: forbidden by proxy"


@pytest.mark.parametrize("wire", WIRES)
async def test_each_named_key_is_its_own_client_and_an_unknown_one_is_refused_before_sending(server, http, wire):
    from agentsteps.activities.llm.providers import ProviderSet
    from agentsteps.contracts.config.settings import ProviderSettings

    server.set_script({"default": {"content": "ok"}})
    other = "sk-test-other-9f8e7d6c5b4a"
    settings = ProviderSettings(
        openai_base_url=server.url_openai,
        anthropic_base_url=server.url_anthropic,
        openai_api_key=SecretStr(KEY),
        anthropic_api_key=SecretStr(KEY),
    )
    providers = ProviderSet(settings, http, {wire: {"acme": SecretStr(other)}})
    model = "claude-sonnet-4-20250514" if wire == "anthropic" else "gpt-4o-2024-08-06"
    before = len(server.requests)
    for key in ("default", "acme"):
        await providers.get(wire, key).complete(
            request(Message.user("hi"), config=LLMConfig(model=model, provider=wire))
        )
    sent = [r.headers["authorization"] for r in server.requests[before:]]
    assert sent == [f"Bearer {KEY}", f"Bearer {other}"]
    with pytest.raises(NonRetryableProviderError) as caught:
        providers.get(wire, "initech")
    assert f"the {wire} API key 'initech' is not configured on this worker (it has acme, default)" in str(caught.value)
    with pytest.raises(NonRetryableProviderError) as pasted:
        providers.get(wire, other + "x" * 60)  # a secret where its name belongs is never echoed
    assert other not in str(pasted.value)
    assert len(server.requests) == before + 2
