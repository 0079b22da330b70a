"""MCP servers as a ``ToolSource`` for the ``tools.*`` activities.

With this, every workflow's ordinary ``tools.call`` reaches MCP tools (tool
mode, code mode, pipelines, the monitor); it is the only way in.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from ...contracts.llm.tools import ToolCallInput, ToolCallResult, ToolSchema
from ...contracts.mcp import McpError, server_of_source
from .client import McpToolClient


def as_application_error(error: McpError) -> ApplicationError:
    """Type = class name; ``non_retryable`` follows ``McpError.retryable``."""
    return ApplicationError(str(error), type=type(error).__name__, non_retryable=not error.retryable)


class McpToolSource:
    def __init__(self, client: McpToolClient) -> None:
        self.client = client

    async def describe(self) -> list[ToolSchema]:
        try:
            return await self.client.list_tools()
        except McpError as error:
            raise as_application_error(error) from None

    async def call(self, schema: ToolSchema, call: ToolCallInput) -> ToolCallResult:
        server = server_of_source(schema.source)
        if server is None:
            raise ValueError(f"tool {schema.name!r} does not come from an MCP server (source {schema.source!r})")
        try:
            return await self.client.call_tool(server, call)
        except McpError as error:
            raise as_application_error(error) from None
