"""Streaming through the official SDKs (SSE from the scripted model on loopback): the assembled answer is
exactly the non-streamed one, text arrives in order as it streams, and a broken stream is a typed error."""

from __future__ import annotations

import time

import httpx2
import pytest
from pydantic import SecretStr
from test_providers import KEY, WEATHER

from agentsteps.activities.llm.providers import AnthropicProvider, OpenAIProvider
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.llm.providers.streams import AnthropicEvents, OpenAIChunks
from agentsteps.contracts import LLMConfig, LLMRequest, Message
from agentsteps.contracts.errors import NonRetryableProviderError, RetryableProviderError
from agentsteps.scripted_model import ScriptedModelServer

WIRES = ["openai", "anthropic"]
ANSWER = "It is sunny in Lisbon, 24 degrees, with a light breeze from the sea."


def provider(wire: str, server: ScriptedModelServer, http: httpx2.AsyncClient):
    cls = OpenAIProvider if wire == "openai" else AnthropicProvider
    url = server.url_openai if wire == "openai" else server.url_anthropic
    return cls(http, base_url=url, api_key=SecretStr(KEY))


def request(wire: str) -> LLMRequest:
    return LLMRequest(
        config=LLMConfig(model="scripted-v1", provider=wire),
        messages=[Message.system("be brief"), Message.user("weather in Lisbon and Porto?")],
        tools=[WEATHER],
    )


@pytest.fixture
async def http():
    async with provider_http_client(30.0) as client:  # the worker's own client and transport
        yield client


REPLIES = {
    "text": {"content": ANSWER, "stream": {"chunk_chars": 5}},
    "tool calls": {
        "content": "Let me look.",
        "stream": {"chunk_chars": 3},
        "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Lisbon"}, "id": "c1"},
            {"name": "get_weather", "arguments": {"city": "Porto"}, "id": "c2"},
        ],
    },
    "broken arguments": {"tool_calls": [{"name": "get_weather", "arguments": '{"city": "Lis', "id": "c1"}]},
    "cached usage": {
        "content": "ok",
        "thinking": "let me think",
        "usage": {"cache_read_tokens": 7, "completion_tokens": 9},
    },
    "length": {"content": "cut sh", "finish_reason": "length"},
}


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("case", list(REPLIES))
async def test_a_streamed_call_assembles_exactly_the_non_streamed_answer(wire, case, http):
    with ScriptedModelServer({"default": REPLIES[case]}) as server:
        plain = await provider(wire, server, http).complete(request(wire))
        [sent_plain] = [r.body for r in server.requests]
        server.set_script({"default": REPLIES[case]})  # same serial numbers, an empty prompt cache
        deltas: list[str] = []
        streamed = await provider(wire, server, http).stream(request(wire), deltas.append)
        [sent_streamed] = [r.body for r in server.requests]

    assert streamed == plain
    assert "".join(deltas) == (plain.message.content or "")
    if len(plain.message.content or "") > 6:
        assert len(deltas) > 1  # it arrived in pieces
    assert "stream" not in sent_plain and sent_streamed.pop("stream") is True
    if wire == "openai":
        assert sent_streamed.pop("stream_options") == {"include_usage": True}
    assert sent_streamed == sent_plain  # otherwise the very same request


@pytest.mark.parametrize("wire", WIRES)
async def test_text_reaches_the_caller_while_the_model_is_still_writing(wire, http):
    # Ten pieces 0.2 s apart: a transport that read the whole body first would deliver nothing for 2 s.
    reply = {"content": "0123456789" * 5, "stream": {"chunk_chars": 5, "delay_seconds": 0.2}}
    seen_at: list[float] = []
    with ScriptedModelServer({"default": reply}) as server:
        started = time.monotonic()
        await provider(wire, server, http).stream(request(wire), lambda _: seen_at.append(time.monotonic()))
        finished = time.monotonic()

    assert len(seen_at) > 1 and seen_at[0] - started < (finished - started) - 1.0


@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_with_a_malformed_event_is_a_typed_non_retryable_error(wire, http):
    with ScriptedModelServer({"default": {"content": ANSWER, "stream": {"fault": "malformed"}}}) as server:
        with pytest.raises(NonRetryableProviderError, match="malformed provider response.*not JSON"):
            await provider(wire, server, http).stream(request(wire), lambda _: None)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_truncated_stream_is_retryable(wire, http):
    with ScriptedModelServer({"default": {"content": ANSWER, "stream": {"fault": "truncated"}}}) as server:
        with pytest.raises(RetryableProviderError, match="truncated"):
            await provider(wire, server, http).stream(request(wire), lambda _: None)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_cut_after_its_finish_before_usage_or_done_is_truncated_and_retryable(wire, http):
    with ScriptedModelServer({"default": {"content": ANSWER, "stream": {"fault": "cut_after_finish"}}}) as server:
        with pytest.raises(RetryableProviderError, match="truncated"):
            await provider(wire, server, http).stream(request(wire), lambda _: None)


OVERLOADED = [
    {"status": 503, "error_type": "server_error", "message": "upstream overloaded"},  # vLLM / LiteLLM
    {"status": 429, "error_type": "rate_limit_error", "message": "slow down"},
    {"status": 500, "error_type": "overloaded_error", "message": "Overloaded"},
]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("error", OVERLOADED, ids=lambda e: e["error_type"])
async def test_an_overload_or_server_error_event_inside_a_stream_is_retryable(wire, error, http):
    reply = {"content": ANSWER, "stream": {"fault": "error_event", "error": error}}
    with ScriptedModelServer({"default": reply}) as server:
        with pytest.raises(RetryableProviderError, match="error event in the stream") as caught:
            await provider(wire, server, http).stream(request(wire), lambda _: None)
    assert error["message"] in str(caught.value)


@pytest.mark.parametrize("wire", WIRES)
async def test_an_error_event_reporting_a_rejected_request_is_not_retried(wire, http):
    error = {"status": 400, "error_type": "invalid_request_error", "message": "prompt too long"}
    reply = {"content": ANSWER, "stream": {"fault": "error_event", "error": error}}
    with ScriptedModelServer({"default": reply}) as server:
        with pytest.raises(NonRetryableProviderError, match="prompt too long"):
            await provider(wire, server, http).stream(request(wire), lambda _: None)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_without_usage_is_a_typed_error_not_a_free_call(wire, http):
    with ScriptedModelServer({"default": {"content": ANSWER, "stream": {"fault": "no_usage"}}}) as server:
        with pytest.raises(NonRetryableProviderError, match="no usage"):
            await provider(wire, server, http).stream(request(wire), lambda _: None)


@pytest.mark.parametrize("wire", WIRES)
async def test_an_error_status_before_the_stream_starts_is_classified_as_usual(wire, http):
    with ScriptedModelServer({"default": {"fault": {"status": 429, "retry_after": "2"}}}) as server:
        with pytest.raises(RetryableProviderError) as caught:
            await provider(wire, server, http).stream(request(wire), lambda _: None)
    assert caught.value.status == 429 and caught.value.retry_after == 2


# ------------------------------------------------------------------ hostile events, one by one


@pytest.mark.parametrize(
    "chunk",
    [
        [],
        "text",
        {"choices": "none"},
        {"choices": [5]},
        {"choices": [{"delta": "hi"}]},
        {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
        {"choices": [{"delta": {"tool_calls": [7]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": "f"}]}}]},
    ],
    ids=str,
)
def test_an_openai_chunk_of_the_wrong_shape_is_a_typed_malformed_error(chunk):
    with pytest.raises(NonRetryableProviderError, match="malformed provider response from openai"):
        OpenAIChunks().add(chunk)


@pytest.mark.parametrize(
    "events",
    [
        ["text"],
        [{"type": "message_start", "message": "m"}],
        [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}],
        [{"type": "content_block_start", "index": 0, "content_block": None}],
        [{"type": "message_delta", "delta": {}, "usage": {"output_tokens": 3}}],  # before message_start
    ],
    ids=str,
)
def test_an_anthropic_event_of_the_wrong_shape_or_order_is_a_typed_malformed_error(events):
    assembler = AnthropicEvents()
    with pytest.raises(NonRetryableProviderError, match="malformed provider response from anthropic"):
        for event in events:
            assembler.add(event)


async def test_an_error_event_inside_an_anthropic_stream_is_retryable_and_keeps_no_secret():
    sse = (
        b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "type": "message", '
        b'"role": "assistant", "model": "x", "content": [], "usage": {"input_tokens": 1, "output_tokens": 1}}}\n\n'
        b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "busy '
        + KEY.encode()
        + b'"}}\n\n'
    )
    transport = httpx2.MockTransport(
        lambda r: httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        provider = AnthropicProvider(client, base_url="http://model.test", api_key=KEY)
        with pytest.raises(RetryableProviderError, match="error event in the stream") as caught:
            await provider.stream(request("anthropic"), lambda _: None)
    assert KEY not in str(caught.value) and caught.value.__cause__ is None and caught.value.__context__ is None
