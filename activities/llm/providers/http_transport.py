"""The providers' HTTP transport: the SDKs' ``httpx2`` client, sending through aiohttp.

The official SDKs build and parse every request with ``httpx2`` (request and
response types, auth, headers, timeouts, error classes), so they stay the
source of truth. Only the exchange on the socket is aiohttp's: an httpx2 POST
through httpcore2 and anyio costs ~0.8 ms of CPU on loopback, aiohttp's the
same POST ~0.2 ms, and a worker makes one per model call. aiohttp's errors
are mapped to the httpx2 exceptions the default transport raises, so
``errors.classify_sdk_error`` sees the same classes (timeouts and dropped
connections retryable, a bad URL not). TCP_NODELAY is aiohttp's default.

Proxies from the environment still go through httpx2's own proxy transports
(``trust_env``), which take precedence over this one for proxied URLs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import NoReturn

import aiohttp
import httpx2

_DROPPED = frozenset({b"content-length", b"transfer-encoding", b"connection"})
"""Headers aiohttp writes itself from the body and its connection pool."""


class AiohttpTransport(httpx2.AsyncBaseTransport):
    def __init__(self, *, max_connections: int = 100, keepalive_seconds: float = 5.0) -> None:
        self._max_connections = max_connections
        self._keepalive = keepalive_seconds
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        # Created on first use: an aiohttp session belongs to the running event loop.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, keepalive_timeout=self._keepalive, ssl=httpx2.create_ssl_context()
            )
            # Bodies arrive as sent: httpx2 decodes them by their Content-Encoding, as with its own transport.
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
            )
        return self._session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout = request.extensions.get("timeout", {})
        headers = [
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw if k.lower() not in _DROPPED
        ]
        body = await request.aread()
        try:
            response = await self._open().request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=timeout.get("pool"),
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                ),
            )
        except Exception as exc:  # noqa: BLE001 - mapped onto httpx2's classes, or raised as is
            _raise_as_httpx(exc, request)
        # The body is handed over as it arrives, so a streamed answer (server-sent events) reaches
        # the SDK event by event; a non-streamed call reads it whole through the same stream.
        return httpx2.Response(
            response.status,
            headers=list(response.raw_headers),
            stream=_AiohttpBody(response, request),
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode()},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _AiohttpBody(httpx2.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except Exception as exc:  # noqa: BLE001 - mapped onto httpx2's classes, or raised as is
            _raise_as_httpx(exc, self._request)

    async def aclose(self) -> None:
        self._response.release()


def _raise_as_httpx(exc: Exception, request: httpx2.Request) -> NoReturn:
    mapped = _httpx_error(exc, request)
    if mapped is None:
        raise exc
    raise mapped from exc


def _httpx_error(exc: Exception, request: httpx2.Request) -> Exception | None:
    """The httpx2 exception the default transport raises for the same failure."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(message, request=request)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return httpx2.ReadTimeout(message, request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx2.UnsupportedProtocol(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(message, request=request)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
        return httpx2.RemoteProtocolError(message, request=request)
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return httpx2.ReadError(message, request=request)
    return None


def provider_http_client(timeout_seconds: float | None, *, max_connections: int = 100) -> httpx2.AsyncClient:
    """The one HTTP client the worker's providers share (the SDKs' types, aiohttp's socket work).

    ``max_connections`` matches the SDK's default of concurrent activities, so a burst
    of model calls reuses kept-alive connections instead of opening new ones.
    """
    return httpx2.AsyncClient(timeout=timeout_seconds, transport=AiohttpTransport(max_connections=max_connections))


__all__ = ["AiohttpTransport", "provider_http_client"]
