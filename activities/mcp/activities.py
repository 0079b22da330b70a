"""The ``mcp.list_tools`` and ``mcp.call_tool`` activities.

Typed ``McpError``\\ s leave as ``ApplicationError`` whose type is the class
name and whose ``non_retryable`` flag follows ``McpError.retryable``, so the
workflow's retry policy needs no list of MCP error names.
"""

from __future__ import annotations

import time

from temporalio import activity

from ...contracts.llm.tools import ToolCallResult, ToolSchema
from ...contracts.mcp import MCP_CALL_TOOL, MCP_LIST_TOOLS, McpCallInput, McpError, McpListToolsInput
from ...contracts.config.mcp_config import McpConfig
from ...contracts.llm.tools import ToolCallResult, ToolSchema
from ...telemetry.metrics import TOOL_CALL_SECONDS, TOOL_CALLS
from .client import McpToolClient
from .pool import McpSessionPool
from .secrets import SecretResolver
from .source import McpToolSource, as_application_error


class McpActivities:
    """Holds the worker's session pool; register ``activities()`` on the worker."""

    def __init__(self, client: McpToolClient) -> None:
        self.client = client

    @activity.defn(name=MCP_LIST_TOOLS)
    async def list_tools(self, input: McpListToolsInput) -> list[ToolSchema]:
        try:
            return await self.client.list_tools(input.server)
        except McpError as error:
            raise as_application_error(error) from None

    @activity.defn(name=MCP_CALL_TOOL)
    async def call_tool(self, input: McpCallInput) -> ToolCallResult:
        started = time.perf_counter()
        outcome = "infra_error"
        try:
            result = await self.client.call_tool(input.server, input.call)
            outcome = "error" if result.is_error else "ok"
            return result
        except McpError as error:
            raise as_application_error(error) from None
        finally:
            # A name the model made up must not become a metric label.
            tool = input.call.name if self.client.is_known(input.server, input.call.name) else "unknown"
            TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()
            TOOL_CALL_SECONDS.labels(tool=tool).observe(time.perf_counter() - started)

    def activities(self) -> list:
        return [self.list_tools, self.call_tool]

    def source(self) -> McpToolSource:
        """The same pool as a ``ToolSource``, for ``ToolActivities`` (``tools.call``)."""
        return McpToolSource(self.client)

    async def aclose(self) -> None:
        await self.client.aclose()


def build_mcp_activities(config: McpConfig, secrets: SecretResolver) -> McpActivities:
    """Activities over ``config``'s servers (``client.settings.load_mcp_config`` reads it from the config file)."""
    return McpActivities(McpToolClient(McpSessionPool(config, secrets)))
