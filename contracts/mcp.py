"""MCP: tool sources, and the errors the worker's MCP client raises.

A server's command, URL and credentials stay in the worker's config and
secrets; nothing in a workflow input names them.

    McpError (AgentStepsError)        ``retryable`` says how Temporal should treat it
    ├── McpConfigError         no  unknown server, bad config file, missing secret, tool name collision
    ├── McpAuthError           no  the server rejected the credential (HTTP 401/403, tracker code -32030)
    ├── McpUnavailableError    yes cannot start or reach the server, connection lost, timeout, 5xx, circuit open
    ├── McpServerDownError     no  the server has been down longer than its ``give_up_seconds``
    └── McpProtocolError       no  the server answered something that is not valid MCP

A tool's own failure (``is_error``), arguments the server rejects, and a
result that fails the tool's output schema are not exceptions: they come back
as ``ToolCallResult(is_error=True)`` for the model to read.
"""

from __future__ import annotations

from .errors import AgentStepsError

MCP_SOURCE_PREFIX = "mcp:"
IDEMPOTENCY_ARGUMENT = "idempotency_key"
"""A tool parameter with this name is the engine's: hidden from the model and always set to
``ToolCallInput.idempotency_key``."""


def mcp_source(server: str) -> str:
    return f"{MCP_SOURCE_PREFIX}{server}"


class McpError(AgentStepsError):
    retryable = False
    recorded = False
    """Set once the fleet counted this failure against its server's health (``activities/mcp/fleet.py``)."""

    def __init__(self, message: str, *, server: str | None = None) -> None:
        self.server = server
        super().__init__(f"mcp server {server!r}: {message}" if server else message)


class McpConfigError(McpError):
    pass


class McpAuthError(McpError):
    pass


class McpUnavailableError(McpError):
    retryable = True

    def __init__(self, message: str, *, server: str | None = None, outcome: str = "infra_error") -> None:
        self.outcome = outcome
        """The ``agentsteps_mcp_calls_total`` outcome: ``infra_error``, ``timeout`` or ``circuit_open``."""
        super().__init__(message, server=server)


class McpServerDownError(McpError):
    """A run's server stayed down past its ``give_up_seconds``: the run fails instead of waiting on."""


class McpProtocolError(McpError):
    pass


__all__ = [
    "IDEMPOTENCY_ARGUMENT",
    "mcp_source",
    "MCP_SOURCE_PREFIX",
    "McpAuthError",
    "McpConfigError",
    "McpError",
    "McpProtocolError",
    "McpServerDownError",
    "McpUnavailableError",
]
