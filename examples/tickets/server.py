"""The ticket tracker as an MCP server (official SDK v2, ``MCPServer``).

Credential check, one rule per transport:

- streamable HTTP: every request must carry ``Authorization: Bearer <token>``;
  anything else gets HTTP 401 with a JSON-RPC error body, before MCP sees it.
- stdio: the client launches the process with ``TICKETS_API_TOKEN`` in its
  environment. Every request other than the handshake is refused with error
  code ``AUTH_ERROR_CODE`` when that token is missing or wrong, so a bad
  credential surfaces as a typed error on the first call rather than as a
  process that will not start (which would look like an outage and be retried).

The token the server expects comes from ``--token-file`` or the
``TICKETS_EXPECTED_TOKEN`` environment variable; ``--insecure-no-auth`` turns
the check off explicitly. Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import json
from typing import Annotated, Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import ToolAnnotations
from pydantic import Field

from .db import TicketError, TicketStore
from .models import Comment, Issue, IssueDetail, IssuePage, IssueState

AUTH_ERROR_CODE = -32030
"""Server-defined JSON-RPC code for a missing or wrong API token."""

_HANDSHAKE_METHODS = frozenset({"initialize", "server/discover", "ping"})

IdempotencyKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="Makes the write safe to retry: the same key with the same arguments returns the first "
        "result without writing again; the same key with different arguments is an error.",
    ),
]


def _tokens_match(presented: str | None, expected: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), expected.encode())


class StdioTokenCheck:
    """Middleware for stdio: the process's own ``TICKETS_API_TOKEN`` must match."""

    def __init__(self, expected: str, presented: str | None) -> None:
        self._ok = _tokens_match(presented, expected)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is not None and ctx.method not in _HANDSHAKE_METHODS and not self._ok:
            raise MCPError(code=AUTH_ERROR_CODE, message="unauthorized: TICKETS_API_TOKEN is missing or wrong")
        return await call_next(ctx)


class BearerGate:
    """ASGI wrapper for streamable HTTP: no valid bearer token, no MCP."""

    def __init__(self, app: Any, expected: str) -> None:
        self._app = app
        self._expected = expected

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not _tokens_match(token.strip(), self._expected):
                body = json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": AUTH_ERROR_CODE, "message": "unauthorized: bearer token missing or wrong"},
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="tickets"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self._app(scope, receive, send)


def _tool_error(exc: TicketError) -> ToolError:
    return ToolError(f"{type(exc).__name__}: {exc}")


def build_server(store: TicketStore) -> MCPServer:
    """The tracker's tools over ``store``; auth is added by the transport runner."""
    mcp = MCPServer(
        "tickets",
        instructions="A ticket tracker. Issues have ids like PROJ-123. Writes take an idempotency_key.",
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    idempotent_write = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    @mcp.tool(annotations=read_only)
    async def list_issues(
        project: Annotated[str | None, Field(description="Project key such as PROJ, OPS, WEB, API.")] = None,
        state: Annotated[IssueState | None, Field(description="open, in_progress or closed.")] = None,
        assignee: Annotated[str | None, Field(description="Exact assignee user name.")] = None,
        updated_before: Annotated[
            str | None, Field(description="ISO 8601 timestamp; only issues last updated strictly before it.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Page size, 1 to 200.")] = 50,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page.")] = None,
    ) -> IssuePage:
        """List issues, oldest-updated first, with full bodies. Page with `cursor`."""
        try:
            return store.list_issues(
                project=project,
                state=state,
                assignee=assignee,
                updated_before=updated_before,
                limit=limit,
                cursor=cursor,
            )
        except TicketError as exc:
            raise _tool_error(exc) from exc

    @mcp.tool(annotations=read_only)
    async def get_issue(id: Annotated[str, Field(description='Issue id, e.g. "PROJ-123".')]) -> IssueDetail:
        """One issue with all its comments."""
        try:
            return store.get_issue(id)
        except TicketError as exc:
            raise _tool_error(exc) from exc

    @mcp.tool(annotations=idempotent_write)
    async def add_comment(
        issue_id: Annotated[str, Field(description='Issue id, e.g. "PROJ-123".')],
        body: Annotated[str, Field(min_length=1, max_length=20_000)],
        author: Annotated[str, Field(min_length=1, max_length=100)],
        idempotency_key: IdempotencyKey,
    ) -> Comment:
        """Add a comment to an issue (bumps its updated_at)."""
        try:
            return store.add_comment(issue_id, body, author, idempotency_key)
        except TicketError as exc:
            raise _tool_error(exc) from exc

    @mcp.tool(annotations=idempotent_write)
    async def update_issue(
        issue_id: Annotated[str, Field(description='Issue id, e.g. "PROJ-123".')],
        idempotency_key: IdempotencyKey,
        state: IssueState | None = None,
        assignee: Annotated[str | None, Field(description='New assignee; "" unassigns.')] = None,
        labels: Annotated[list[str] | None, Field(description="Replaces the label set.")] = None,
        add_labels: Annotated[list[str] | None, Field(description="Labels to add to the current set.")] = None,
    ) -> Issue:
        """Change an issue's state, assignee or labels; unset fields are left as they are."""
        try:
            return store.update_issue(
                issue_id, idempotency_key, state=state, assignee=assignee, labels=labels, add_labels=add_labels
            )
        except TicketError as exc:
            raise _tool_error(exc) from exc

    return mcp


async def run_stdio(store: TicketStore, *, expected_token: str | None, presented_token: str | None) -> None:
    mcp = build_server(store)
    if expected_token is not None:
        mcp.middleware.append(StdioTokenCheck(expected_token, presented_token))
    await mcp.run_stdio_async()


async def run_http(store: TicketStore, *, host: str, port: int, expected_token: str | None) -> None:
    import uvicorn

    mcp = build_server(store)
    app: Any = mcp.streamable_http_app(host=host)
    if expected_token is not None:
        app = BearerGate(app, expected_token)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    await server.serve()
