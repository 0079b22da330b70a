"""Where tools come from besides the Python registry (MCP servers, for now)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ...contracts import ToolCallInput, ToolCallResult, ToolSchema


class ToolSource(Protocol):
    """A set of tools served from elsewhere, such as the worker's MCP servers."""

    async def describe(self, names: Sequence[str] | None = None) -> list[ToolSchema]:
        """The schemas of ``names`` this source offers (all it can reach when None).

        Asks only what serves those names; raises a retryable error when a part
        that may serve a name it could not find is unreachable.
        """
        ...

    async def owners(self, names: Sequence[str]) -> dict[str, str]:
        """Of ``names``, those this source also offers -> who offers each (a source label).

        Asks what may serve them, as ``describe`` would, never only a cache, so a clash is
        found by every worker alike; a part that cannot be reached is skipped, not an error.
        """
        ...

    async def call(self, call: ToolCallInput) -> ToolCallResult | None:
        """Run one call (None: this source has no tool of that name).

        Tool failures come back as ``is_error`` results, infrastructure failures raise.
        """
        ...
