"""The worker's MCP servers: one fleet over one session pool, offered to ``tools.*`` as a ``ToolSource``.

Workflows reach MCP tools only through ``tools.describe`` / ``tools.call``
(tool mode, code mode, pipelines and the monitor alike); there are no
``mcp.*`` activities. Typed ``McpError``\\ s leave ``tools.*`` as
``ApplicationError`` whose type is the class name and whose ``non_retryable``
flag follows ``McpError.retryable`` (``failures.to_application_error``).
"""

from __future__ import annotations

from ...contracts.config.mcp_config import McpConfig
from .client import McpToolClient
from .fleet import McpFleet
from .pool import McpSessionPool
from .secrets import SecretResolver
from .source import McpToolSource


class McpActivities:
    """Holds the worker's fleet; ``source()`` is what ``ToolActivities`` calls through."""

    def __init__(self, client: McpToolClient) -> None:
        self.client = client
        self.fleet = McpFleet(client)

    def source(self) -> McpToolSource:
        """The fleet as a ``ToolSource``, for ``ToolActivities`` (``tools.describe`` / ``tools.call``)."""
        return McpToolSource(self.fleet)

    def start(self) -> None:
        """Connect to every server in the background and keep watching them (the worker calls this)."""
        self.fleet.start()

    async def aclose(self) -> None:
        await self.fleet.aclose()


def build_mcp_activities(config: McpConfig, secrets: SecretResolver) -> McpActivities:
    """Activities over ``config``'s servers (``client.settings.load_mcp_config`` reads it from the config file)."""
    return McpActivities(McpToolClient(McpSessionPool(config, secrets)))
