"""One live MCP session per configured server, shared by every activity in a worker.

Each session is owned by its own background task: anyio task groups and
cancel scopes inside the SDK's transports must be entered and exited by the
same task, while activities come and go on other tasks. Activities only send
requests through the session, which is safe from any task on the loop.

A session is replaced when its owner task has ended, when its transport has
reported end-of-stream (the stdio child died), or when a caller ``discard``\\ s
it after an infrastructure failure or timeout (which also kills a hung stdio
child). Secrets are resolved here, at connect time, and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2

from ...contracts.config.mcp_config import HttpServerConfig, McpConfig, McpServerConfig, StdioServerConfig
from ...contracts.mcp import McpConfigError
from . import sdk
from .errors import translate
from .secrets import SecretResolver

if TYPE_CHECKING:  # the SDK itself loads with the first connection (sdk.py)
    import mcp_types as types
    from mcp import Client

log = logging.getLogger(__name__)

_MAX_LIST_PAGES = 100


@dataclass
class McpConnection:
    server: str
    config: McpServerConfig
    client: Client
    secrets: list[str]
    """The resolved secret values this connection carries; results are scrubbed of them."""
    tools: dict[str, types.Tool] = field(default_factory=dict)
    last_http_status: list[int | None] = field(default_factory=lambda: [None])
    _owner: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def http_status(self) -> int | None:
        return self.last_http_status[0]

    def alive(self) -> bool:
        if self._owner is None or self._owner.done():
            return False
        # The dispatcher flips this on end-of-stream; checking it lets a call after a
        # dead child reconnect instead of failing once first.
        dispatcher = getattr(self.client.session, "_dispatcher", None)
        return not getattr(dispatcher, "_closed", False)

    async def list_all_tools(self) -> list[types.Tool]:
        import mcp_types as types

        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            page = await self.client.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = {tool.name: tool for tool in tools}
        return tools

    async def close(self) -> None:
        self._stop.set()
        if self._owner is not None and not self._owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._owner), timeout=5)
            except (TimeoutError, Exception):
                self._owner.cancel()
                with contextlib.suppress(BaseException):
                    await self._owner


class McpSessionPool:
    """Sessions keyed by server name; connect lazily, reconnect after failure."""

    def __init__(self, config: McpConfig, secrets: SecretResolver) -> None:
        self.config = config
        self._secrets = secrets
        self._connections: dict[str, McpConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.on_connect: Callable[[str], None] = lambda server: None
        """Called after each session is established (the fleet counts reconnects)."""
        self.on_list_changed: Callable[[str], None] = lambda server: None
        """Called on ``notifications/tools/list_changed`` (the fleet drops its cached catalog)."""

    @property
    def secrets(self) -> SecretResolver:
        return self._secrets

    def server_config(self, server: str) -> McpServerConfig:
        try:
            return self.config.servers[server]
        except KeyError:
            known = ", ".join(sorted(self.config.servers)) or "none"
            raise McpConfigError(f"no MCP server named {server!r} is configured (configured: {known})") from None

    async def connection(self, server: str) -> McpConnection:
        config = self.server_config(server)
        lock = self._locks.setdefault(server, asyncio.Lock())
        async with lock:
            current = self._connections.get(server)
            if current is not None and current.alive():
                return current
            if current is not None:
                self._connections.pop(server, None)
                await current.close()
            connection = await self._connect(server, config)
            self._connections[server] = connection
            self.on_connect(server)
            return connection

    def current(self, server: str) -> McpConnection | None:
        return self._connections.get(server)

    async def discard(self, connection: McpConnection) -> None:
        """Drop ``connection`` (if still current) after a failure; the next call reconnects."""
        if self._connections.get(connection.server) is connection:
            del self._connections[connection.server]
        await connection.close()

    async def aclose(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.close()

    def _build_client(
        self, server: str, config: McpServerConfig, status_box: list[int | None]
    ) -> tuple[Client, list[str], httpx2.AsyncClient | None]:
        import mcp_types as types
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client

        timeouts = config.timeouts
        http: httpx2.AsyncClient | None = None
        if isinstance(config, StdioServerConfig):
            env = self._secrets.resolve_all(config.env, server=server)
            secrets = self._secrets.values_in(config.env.values(), server=server)
            params = StdioServerParameters(command=config.command, args=list(config.args), env=env, cwd=config.cwd)
            transport: Any = stdio_client(params, errlog=sys.stderr)
        elif isinstance(config, HttpServerConfig):
            headers = self._secrets.resolve_all(config.headers, server=server)
            secrets = self._secrets.values_in(config.headers.values(), server=server)

            async def remember_status(response: httpx2.Response) -> None:
                status_box[0] = response.status_code

            http = httpx2.AsyncClient(
                headers=headers,
                timeout=httpx2.Timeout(timeouts.connect_seconds, read=max(timeouts.call_seconds, 300.0)),
                event_hooks={"response": [remember_status]},
            )
            transport = streamable_http_client(config.url, http_client=http)
        else:  # pragma: no cover - the config union is closed
            raise McpConfigError(f"unsupported transport {config!r}", server=server)

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                self.on_list_changed(server)

        # Client-side response caching would hide a server restart's new tool list.
        client = Client(transport, read_timeout_seconds=timeouts.call_seconds, cache=None, message_handler=on_message)
        return client, secrets, http

    async def _connect(self, server: str, config: McpServerConfig) -> McpConnection:
        await sdk.load()
        status_box: list[int | None] = [None]
        client, secrets, http_client = self._build_client(server, config, status_box)
        connection = McpConnection(
            server=server, config=config, client=client, secrets=secrets, last_http_status=status_box
        )
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def own() -> None:
            try:
                async with client:
                    ready.set_result(None)
                    await connection._stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                elif not isinstance(exc, asyncio.CancelledError):
                    log.info("mcp server %r: session ended: %s", server, type(exc).__name__)
            finally:
                if http_client is not None:
                    with contextlib.suppress(Exception):
                        await http_client.aclose()

        connection._owner = asyncio.create_task(own(), name=f"mcp-session-{server}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout=config.timeouts.connect_seconds)
            await asyncio.wait_for(connection.list_all_tools(), timeout=config.timeouts.list_seconds)
        except BaseException as exc:
            await connection.close()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise translate(exc, server=server, http_status=status_box[0], during="connect", secrets=secrets) from None
        return connection
