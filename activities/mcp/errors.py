"""Translates whatever the MCP SDK, anyio, httpx2 or the OS raise into the ``McpError`` tree.

This is the one place third-party exceptions are sorted: retryable
(``McpUnavailableError``) versus not. JSON-RPC errors that reject one request
(bad arguments, unknown tool) are not translated here; the caller turns them
into an error result for the model. An SDK error can only come from a
connection, so the SDK is imported where it is matched (it loads with the
pool's first connection, ``sdk.py``).
"""

from __future__ import annotations

import httpx2
from anyio import BrokenResourceError, ClosedResourceError, EndOfStream
from pydantic import ValidationError

from ...contracts.mcp import McpAuthError, McpConfigError, McpError, McpProtocolError, McpUnavailableError
from .results import scrub

AUTH_ERROR_CODES = frozenset({-32030})
"""JSON-RPC codes servers use for a rejected credential (the bundled tracker's code)."""


def leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups from anyio task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def is_request_rejection(exc: BaseException, http_status: int | None = None) -> bool:
    """A JSON-RPC error that refuses this one request rather than signalling an outage or bad credential."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

    exc = leaf(exc)
    return (
        isinstance(exc, MCPError)
        and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT, INTERNAL_ERROR)
        and exc.code not in AUTH_ERROR_CODES
        and http_status not in (401, 403)
        and not (http_status is not None and (http_status >= 500 or http_status in (408, 429)))
    )


def translate(
    exc: BaseException, *, server: str, http_status: int | None = None, during: str, secrets: list[str] | None = None
) -> McpError:
    """The typed error for ``exc``; ``during`` says what was being done, for the message.

    ``secrets`` are redacted from the message, in case the server echoed a credential back.
    """
    error = _translate(leaf(exc), server=server, http_status=http_status, during=during)
    if secrets:
        error.args = tuple(scrub(a, secrets) if isinstance(a, str) else a for a in error.args)
    return error


def _translate(exc: BaseException, *, server: str, http_status: int | None, during: str) -> McpError:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

    if isinstance(exc, McpError):
        return exc
    if isinstance(exc, MCPError):
        if exc.code in AUTH_ERROR_CODES or http_status in (401, 403):
            return McpAuthError(f"{during}: credential rejected: {exc.message}", server=server)
        if exc.code == REQUEST_TIMEOUT:
            return McpUnavailableError(f"{during}: timed out", server=server, outcome="timeout")
        if exc.code == CONNECTION_CLOSED:
            return McpUnavailableError(f"{during}: connection closed", server=server)
        if exc.code == INTERNAL_ERROR or (
            http_status is not None and (http_status >= 500 or http_status in (408, 429))
        ):
            status = f" (HTTP {http_status})" if http_status else ""
            return McpUnavailableError(f"{during}: server error{status}: {exc.message}", server=server)
        return McpProtocolError(f"{during}: error {exc.code}: {exc.message}", server=server)
    if isinstance(exc, TimeoutError):
        return McpUnavailableError(f"{during}: timed out", server=server, outcome="timeout")
    if isinstance(exc, FileNotFoundError | PermissionError):
        return McpConfigError(f"{during}: cannot start the server: {exc}", server=server)
    if isinstance(exc, OSError | httpx2.HTTPError | ClosedResourceError | BrokenResourceError | EndOfStream):
        return McpUnavailableError(f"{during}: {type(exc).__name__}: {exc}", server=server)
    if isinstance(exc, ValidationError):
        return McpProtocolError(f"{during}: response is not valid MCP ({exc.error_count()} errors)", server=server)
    return McpProtocolError(f"{during}: {type(exc).__name__}: {exc}", server=server)
