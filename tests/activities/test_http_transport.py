"""The providers' aiohttp transport against raw sockets: encodings, dropped and hostile responses."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.llm.providers.openai import OpenAIProvider
from agentsteps.contracts import LLMConfig, LLMRequest, Message
from agentsteps.contracts.errors import NonRetryableProviderError, RetryableProviderError

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

KEY = "sk-transport-secret-0123456789"
ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "scripted-2026-01-01",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi there"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return head, await reader.readexactly(length)


async def _server(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/v1"


def _request() -> LLMRequest:
    return LLMRequest(config=LLMConfig(model="scripted-2026-01-01"), messages=[Message.user("hi")])


async def _complete(handler: Handler, timeout: float = 5.0):
    async for url in _server(handler):
        async with provider_http_client(timeout) as http:
            return await OpenAIProvider(http, base_url=url, api_key=KEY).complete(_request())


async def test_a_gzip_body_is_decoded_once_and_the_request_reaches_the_wire_whole():
    seen: list[tuple[bytes, bytes]] = []

    async def handler(reader, writer):
        seen.append(await _read_request(reader))
        body = gzip.compress(json.dumps(ANSWER).encode())
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    response = await _complete(handler)
    assert response.message.content == "hi there" and response.usage.total_tokens == 5
    head, body = seen[0]
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1") and f"Bearer {KEY}".encode() in head
    assert json.loads(body)["messages"] == [{"role": "user", "content": "hi"}]


async def test_a_connection_dropped_before_the_answer_is_retryable():
    async def handler(reader, writer):
        await _read_request(reader)
        writer.close()

    with pytest.raises(RetryableProviderError) as caught:
        await _complete(handler)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    "garbage", [b"NOT HTTP AT ALL\r\n\r\n", b'HTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\n{"id"']
)
async def test_a_hostile_or_truncated_response_is_a_typed_error_never_a_crash(garbage):
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(garbage)
        await writer.drain()
        writer.close()

    with pytest.raises((RetryableProviderError, NonRetryableProviderError)) as caught:
        await _complete(handler)
    assert KEY not in str(caught.value)


async def test_a_silent_server_is_a_retryable_timeout_within_the_configured_time():
    async def handler(reader, writer):
        await _read_request(reader)
        await reader.read()  # silent until the client gives up and hangs up

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RetryableProviderError, match="Timeout"):
        await _complete(handler, timeout=0.3)
    assert loop.time() - started < 3


async def test_a_streamed_body_is_read_as_it_arrives_not_when_it_ends():
    first_read = asyncio.Event()
    body_ended = False

    async def handler(reader, writer):
        nonlocal body_ended
        await _read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n6\r\ndata:1\r\n"
        )
        await writer.drain()
        # The body ends once the client has read its first event; a client that waits for the end gets it after 5 s.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(first_read.wait(), 5.0)
        body_ended = True
        writer.write(b"6\r\ndata:2\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    async for url in _server(handler):
        async with provider_http_client(10.0) as http:
            async with http.stream(
                "POST", f"{url}/chat/completions", content=b"{}", headers={"Content-Length": "2"}
            ) as response:
                chunks = []
                async for chunk in response.aiter_bytes():
                    chunks.append((chunk, body_ended))
                    first_read.set()
    assert b"".join(c for c, _ in chunks) == b"data:1data:2"
    assert chunks[0] == (b"data:1", False), chunks  # the first event before the server finished the body
