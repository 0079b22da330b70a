"""The worker's MCP servers: one session pool, offered to ``tools.*`` as a ``ToolSource``.

Workflows reach MCP tools only through ``tools.describe`` / ``tools.call``
(tool mode, code mode, pipelines and the monitor alike); there are no
``mcp.*`` activities. Typed ``McpError``\\ s leave ``tools.*`` as
``ApplicationError`` whose type is the class name and whose ``non_retryable``
flag follows ``McpError.retryable`` (see ``source.as_application_error``).
"""

from __future__ import annotations

from pathlib import Path

from .client import McpToolClient
from .config import load_mcp_config
from .pool import McpSessionPool
from .secrets import SecretResolver
from .source import McpToolSource


class McpActivities:
    """Holds the worker's session pool; ``source()`` is what ``ToolActivities`` calls through."""

    def __init__(self, client: McpToolClient) -> None:
        self.client = client

    def source(self) -> McpToolSource:
        """The pool as a ``ToolSource``, for ``ToolActivities`` (``tools.describe`` / ``tools.call``)."""
        return McpToolSource(self.client)

    async def aclose(self) -> None:
        await self.client.aclose()


def build_mcp_activities(config_path: str | Path | None = None, secrets: SecretResolver | None = None) -> McpActivities:
    """The servers in ``config_path`` (default: ``$AGENTSTEPS_CONFIG`` or ``./agentsteps.toml``)."""
    config = load_mcp_config(config_path)
    return McpActivities(McpToolClient(McpSessionPool(config, secrets or SecretResolver.from_environment())))
