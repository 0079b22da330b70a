"""MCP servers as a ``ToolSource`` for the ``tools.*`` activities.

With this, every workflow's ordinary ``tools.call`` reaches MCP tools (tool
mode, code mode, pipelines, the monitor); it is the only way in. It goes
through the fleet (``fleet.py``): only the servers serving the names asked
are contacted, each behind its own circuit breaker.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...contracts.errors import ToolNotSentError
from ...contracts.llm.tools import ToolCallInput, ToolCallResult, ToolSchema
from ...contracts.mcp import McpError, mcp_source
from ...failures import to_application_error
from .client import McpToolClient
from .fleet import McpFleet


class McpToolSource:
    def __init__(self, fleet: McpFleet | McpToolClient) -> None:
        if isinstance(fleet, McpToolClient):  # a bare client (tests, demos)
            fleet = McpFleet(fleet)
        self.fleet = fleet

    async def describe(self, names: Sequence[str] | None = None) -> list[ToolSchema]:
        try:
            return await self.fleet.describe(names)
        except McpError as error:
            raise to_application_error(error) from None

    async def owners(self, names: Sequence[str]) -> dict[str, str]:
        try:
            resolved = await self.fleet.resolve(names, strict=False)
        except McpError as error:
            raise to_application_error(error) from None
        return {name: mcp_source(server) for name, (server, _) in resolved.items()}

    async def call(self, call: ToolCallInput) -> ToolCallResult | None:
        try:
            return await self.fleet.call(call)
        except McpError as error:
            # For an at-most-once call the client answers every failure after the request may have left
            # with an outcome-unknown result (``McpToolClient.call_tool``), so a retryable error that
            # reaches here was raised before sending: no connection, no catalog, the circuit open.
            if call.delivery == "at_most_once" and error.retryable:
                raise to_application_error(ToolNotSentError(f"not sent: {error}")) from None
            raise to_application_error(error) from None
