"""Where tools come from besides the Python registry (MCP servers, for now)."""

from __future__ import annotations

from typing import Protocol

from ..contracts import ToolCallInput, ToolCallResult, ToolSchema


class ToolSource(Protocol):
    """A set of tools served from elsewhere, such as an MCP server pool."""

    async def describe(self) -> list[ToolSchema]:
        """Every tool this source offers; raises a retryable error when unreachable."""
        ...

    async def call(self, schema: ToolSchema, call: ToolCallInput) -> ToolCallResult:
        """Run one call. Tool failures come back as ``is_error`` results, infrastructure failures raise."""
        ...
