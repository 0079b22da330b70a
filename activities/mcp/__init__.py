"""MCP client: servers from the config file, pooled sessions, offered to ``tools.*`` as a tool source."""

from .activities import McpActivities, build_mcp_activities
from .client import McpToolClient
from .fleet import McpFleet
from .pool import McpSessionPool
from .secrets import SecretResolver
from .source import McpToolSource

__all__ = [
    "McpActivities",
    "McpFleet",
    "McpSessionPool",
    "McpToolClient",
    "McpToolSource",
    "SecretResolver",
    "build_mcp_activities",
]
