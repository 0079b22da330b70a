"""Anthropic ``complete`` sends what ``messages.create`` sends, from a request the SDK built once.

Real HTTP on loopback against the scripted model server. A request hook on the shared httpx2 client keeps
each request as it is handed over (method, URL, headers, body and the timeout the transport gets), so the
kept request is compared with the one the SDK's ``messages.create`` builds for the same call. Failures are
compared with the provider's path through the SDK (``_complete_by_sdk``, the path it took before).
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic._constants import MODEL_NONSTREAMING_TOKENS
from anthropic.resources.messages import DEPRECATED_MODELS
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from agentsteps.activities.llm.providers import AnthropicProvider
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.contracts import (
    LLMConfig,
    LLMRequest,
    Message,
    NonRetryableProviderError,
    ProviderError,
    ResponseFormat,
    ToolSchema,
)
from agentsteps.contracts.config.settings import TracingSettings
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.telemetry import tracing

KEY = "sk-ant-test-prepared-5c4b3a"
LIMITED = next(iter(MODEL_NONSTREAMING_TOKENS))  # a model the SDK caps for calls that do not stream
DEPRECATED = next(iter(DEPRECATED_MODELS))
CURRENT = "claude-sonnet-4-5-scripted"
"""A made-up id no SDK deprecates; claude-*-4-5 takes a temperature and output_config."""
WEATHER = ToolSchema(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _request(model: str = CURRENT, max_tokens: int = 64, *, structured: bool = True) -> LLMRequest:
    return LLMRequest(
        config=LLMConfig(model=model, provider="anthropic", max_tokens=max_tokens, temperature=0.3),
        messages=[
            Message.system("Be brief."),
            Message.user("Weather in Oslo? Ünïcode ✓"),
            Message(role="assistant", content="Checking."),
            Message.user("Go on."),
        ],
        tools=[WEATHER],
        response_format=ResponseFormat(name="answer", json_schema={"type": "object"}) if structured else None,
    )


@pytest.fixture(scope="module")
def server():
    with ScriptedModelServer({"default": {"content": "hi"}}) as s:
        yield s


@asynccontextmanager
async def _http(kind: str, sent: list[httpx2.Request]) -> AsyncIterator[httpx2.AsyncClient]:
    """``sdk_default``: a client at httpx's default timeout, so the SDK derives each call's timeout (and may refuse
    it); ``worker``: the worker's client, whose timeout the SDK takes instead."""

    async def keep(request: httpx2.Request) -> None:
        sent.append(request)

    client = httpx2.AsyncClient() if kind == "sdk_default" else provider_http_client(120.0)
    client.event_hooks = {"request": [keep], "response": []}
    async with client:
        yield client


def _provider(
    http: httpx2.AsyncClient,
    server: ScriptedModelServer,
    *,
    key: str | None = KEY,
    path: str = "",
    api_version: str | None = None,
    timeout: float | None = None,
) -> AnthropicProvider:
    return AnthropicProvider(
        http,
        base_url=server.url_anthropic + path,
        api_key=SecretStr(key) if key else None,
        api_version=api_version,
        timeout=timeout,
    )


async def _by_create(provider: AnthropicProvider, request: LLMRequest) -> Any:
    """What a hand-written call to ``messages.create`` with the provider's settings does."""
    params, extra_body, options = provider._prepared(request)
    return await provider._client.messages.create(
        **params,
        extra_body=extra_body or None,
        timeout=options.get("timeout", anthropic.NOT_GIVEN),
        extra_headers=options.get("headers"),
    )


async def _by_sdk(provider: AnthropicProvider, request: LLMRequest) -> Any:
    return await provider._complete_by_sdk(request, *provider._prepared(request))


async def _outcome(call: Callable[[], Awaitable[Any]]) -> Any:
    try:
        return await call()
    except Exception as exc:  # noqa: BLE001 - compared by type and text
        return exc


async def _on_both_paths(server: ScriptedModelServer, answer: dict[str, Any]) -> tuple[Any, Any]:
    """What ``complete`` (its kept request, asked twice so the second call reuses it) and the SDK's path give
    while the server answers every call with ``answer``."""
    server.set_script({"default": answer})
    try:
        async with _http("worker", []) as http:
            provider = _provider(http, server)
            prepared = await _outcome(lambda: provider.complete(_request()))
            await _outcome(lambda: provider.complete(_request()))
            by_sdk = await _outcome(lambda: _by_sdk(provider, _request()))
            assert provider._post is not None and provider._post.prepared
    finally:
        server.set_script({"default": {"content": "hi"}})
    return prepared, by_sdk


def _uncached(response: Any) -> Any:
    return response.model_copy(
        update={"usage": response.usage.model_copy(update={"cache_read_tokens": 0, "cache_write_tokens": 0})}
    )


def _wire(request: httpx2.Request) -> tuple:
    return (
        request.method,
        str(request.url),
        request.headers.multi_items(),
        request.content,
        request.extensions.get("timeout"),
    )


def _failure(error: Any) -> tuple:
    assert isinstance(error, ProviderError), error
    return type(error), error.status, str(error), getattr(error, "retry_after", None)


@pytest.mark.parametrize("kind", ["sdk_default", "worker"])
@pytest.mark.parametrize(
    "key, api_version, path, timeout",
    [
        (KEY, None, "", None),
        (None, None, "", None),
        (KEY, "2023-06-01", "", 30.0),
        (None, "2023-06-01", "/team/anthropic", 30.0),
        (KEY, None, "/team/anthropic/", None),
    ],
)
@pytest.mark.parametrize(
    "model, max_tokens",
    [(CURRENT, 64), (LIMITED, MODEL_NONSTREAMING_TOKENS[LIMITED]), ("claude-opus-5-20270101", 20_000)],
)
async def test_the_kept_request_is_the_one_messages_create_sends(
    server, kind, key, api_version, path, timeout, model, max_tokens
):
    request = _request(model, max_tokens)
    sent: list[httpx2.Request] = []
    async with _http(kind, sent) as http:
        provider = _provider(http, server, key=key, path=path, api_version=api_version, timeout=timeout)
        first = await _outcome(lambda: provider.complete(request))
        await _outcome(lambda: provider.complete(request))  # the second call sends the kept request
        by_create = await _outcome(lambda: _by_create(provider, request))
        assert provider._post is not None and provider._post.prepared
    kept, again, created = sent
    assert _wire(kept) == _wire(again) == _wire(created)
    if model == CURRENT:  # extra_body (temperature) and output_config are in the bytes compared
        assert b'"temperature":0.3' in kept.content and b'"output_config"' in kept.content
    assert ("authorization" in kept.headers) == bool(key) and "x-api-key" not in kept.headers
    assert kept.headers["anthropic-version"] == (api_version or anthropic._constants.ANTHROPIC_API_VERSION)
    if path:  # the scripted server serves /v1/messages only: both are refused alike
        assert isinstance(by_create, anthropic.NotFoundError)
        assert _failure(first)[:2] == (NonRetryableProviderError, 404)
    else:
        assert first.message.content == "hi" and by_create.content[0].text == "hi"


@pytest.mark.parametrize("kind", ["sdk_default", "worker"])
@pytest.mark.parametrize(
    "model, max_tokens",
    [
        (LIMITED, MODEL_NONSTREAMING_TOKENS[LIMITED] + 1),  # over the model's cap for a call that does not stream
        (CURRENT, 30_000),  # expected to take longer than 10 minutes
        (CURRENT, 21_333),  # just under it
    ],
)
async def test_a_call_the_sdk_refuses_to_send_is_refused_alike_and_nothing_is_sent(server, kind, model, max_tokens):
    request = _request(model, max_tokens)
    sent: list[httpx2.Request] = []
    async with _http(kind, sent) as http:
        provider = _provider(http, server)
        prepared = await _outcome(lambda: provider.complete(request))
        by_sdk = await _outcome(lambda: _by_sdk(provider, request))
        created = await _outcome(lambda: _by_create(provider, request))
    refused = kind == "sdk_default" and max_tokens != 21_333  # the worker's client has a timeout of its own
    if refused:
        assert _failure(prepared) == _failure(by_sdk)
        assert isinstance(prepared, NonRetryableProviderError) and "Streaming is required" in str(prepared)
        assert isinstance(created, ValueError) and str(created) in str(prepared)
        assert sent == []
    else:
        # The scripted server caches prompts: which of the two calls read the cache depends on what ran before.
        assert _uncached(prepared) == _uncached(by_sdk)
        assert prepared.message.content == "hi" and created.content[0].text == "hi"
        assert len(sent) == 3


async def test_a_deprecated_model_warns_as_messages_create_does(server):
    sent: list[httpx2.Request] = []
    async with _http("worker", sent) as http:
        provider = _provider(http, server)
        caught = []
        for call in (provider.complete, lambda r: _by_sdk(provider, r)):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                await call(_request(DEPRECATED, structured=False))
                await call(_request(CURRENT))
            caught.append([(w.category, str(w.message), w.filename) for w in seen])
        assert provider._post is not None and provider._post.prepared
    kept, by_sdk = caught
    assert kept == by_sdk and len(kept) == 1
    assert kept[0][0] is DeprecationWarning and f"The model '{DEPRECATED}' is deprecated" in kept[0][1]
    assert kept[0][2].endswith("anthropic.py")


@pytest.mark.parametrize(
    "fault",
    [
        {"status": 429, "retry_after": "7", "message": "rate limited"},
        {"status": 529, "message": "overloaded"},
        {"status": 503, "message": "upstream broke"},
        {"status": 400, "message": "bad request"},
        {"status": 413, "message": "too large"},
        {"status": 401, "message": f"invalid x-api-key: {KEY}"},  # a hostile answer echoing the key
    ],
)
async def test_an_error_status_is_classified_the_same_on_both_paths(server, fault):
    prepared, by_sdk = await _on_both_paths(server, {"fault": fault})
    assert _failure(prepared) == _failure(by_sdk)
    assert prepared.status == fault["status"] and KEY not in str(prepared)
    if "retry_after" in fault:
        assert prepared.retry_after == 7.0


@pytest.mark.parametrize(
    "raw",
    [
        "this is not json",
        "[1, 2, 3]",
        '{"content": 5}',
        '{"content": [{"type": "text", "text": 7}]}',
        '{"content": [{"type": "tool_use", "input": {}}]}',
        f"<html>bad gateway for {KEY}</html>",
        '{"content": [{"type": "text", "text": "' + "x" * 200_000 + '"}], "stop_reason": "no_such_reason"}',
    ],
)
async def test_a_malformed_answer_gives_the_same_typed_error_on_both_paths(server, raw):
    prepared, by_sdk = await _on_both_paths(server, {"raw_body": raw})
    if isinstance(prepared, Exception):
        assert _failure(prepared) == _failure(by_sdk)
        assert isinstance(prepared, NonRetryableProviderError) and KEY not in str(prepared)
        assert "malformed provider response" in str(prepared)
    else:  # a long text with an unknown stop reason is an answer, the same on both paths
        assert prepared == by_sdk and prepared.finish_reason == "other"


async def test_a_call_inside_a_traced_span_goes_through_the_sdk_which_sends_the_trace_context(server):
    # With the worker's tracing on, llm_span is current and messages.create propagates it (traceparent): a
    # kept request would not carry it, so such a call takes the SDK's path. Outside a span it is kept.
    tracing.configure_tracing(TracingSettings(), exporter=InMemorySpanExporter())
    try:
        sent: list[httpx2.Request] = []
        async with _http("worker", sent) as http:
            provider = _provider(http, server)
            with tracing.llm_span("anthropic", CURRENT):
                await provider.complete(_request())
                await _by_create(provider, _request())
            assert provider._post is not None and not provider._post.prepared
            await provider.complete(_request())
            assert provider._post.prepared
    finally:
        tracing.shutdown_tracing()
    traced, created, untraced = sent
    assert "traceparent" in traced.headers
    assert traced.headers["traceparent"].split("-")[1] == created.headers["traceparent"].split("-")[1]
    assert "traceparent" not in untraced.headers
