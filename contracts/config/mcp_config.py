"""How MCP servers are declared: the typed form of ``[mcp.servers.NAME]`` in the config file.

Values in ``env`` (stdio) and ``headers`` (HTTP) may name worker secrets
instead of holding them: ``"secret:NAME"`` as the whole value, or
``"${secret:NAME}"`` inside a longer string such as ``"Bearer ${secret:TOKEN}"``.
They are resolved in the worker at connect time (see
``activities/mcp/secrets.py``), so a secret never enters a workflow input,
Temporal history, a prompt or a log line. This module only parses the
references; it never reads a secret.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..mcp import McpConfigError

from ..llm.tools import Delivery

SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,40}$"
SECRET_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]{0,127}"

_WHOLE_SECRET = re.compile(rf"^secret:({SECRET_NAME_PATTERN})$")
_EMBEDDED_SECRET = re.compile(rf"\$\{{secret:({SECRET_NAME_PATTERN})\}}")


def secret_references(value: str) -> list[str]:
    """Names of the secrets a config value refers to, in order of appearance."""
    whole = _WHOLE_SECRET.match(value)
    if whole:
        return [whole.group(1)]
    return _EMBEDDED_SECRET.findall(value)


def substitute_secrets(value: str, lookup: dict[str, str]) -> str:
    """``value`` with every reference replaced from ``lookup`` (which must hold them all)."""
    whole = _WHOLE_SECRET.match(value)
    if whole:
        return lookup[whole.group(1)]
    return _EMBEDDED_SECRET.sub(lambda m: lookup[m.group(1)], value)


class McpTimeouts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    connect_seconds: float = Field(default=20.0, gt=0)
    """Start (or reach) the server and finish the handshake and first tool listing."""
    call_seconds: float = Field(default=60.0, gt=0)
    """One ``tools/call`` round trip; past it the session is dropped and the call is retryable."""
    list_seconds: float = Field(default=30.0, gt=0)


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]{0,24}$")
    """Prepended to every tool name this server offers, e.g. ``"tickets_"``, to avoid collisions."""
    timeouts: McpTimeouts = Field(default_factory=McpTimeouts)
    require_approval: list[str] = Field(default_factory=list)
    """Tools of this server (their names on the server, before ``tool_prefix``) whose every call a person
    must approve before it runs."""
    delivery: dict[Annotated[str, Field(min_length=1, max_length=64)], Delivery] = Field(default_factory=dict)
    """Per tool (the server's name, without ``tool_prefix``): ``retry``, ``key`` or ``at_most_once``,
    overriding what the tool's annotations and parameters imply."""


class StdioServerConfig(_ServerBase):
    transport: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the child; values may be secret references."""
    cwd: str | None = None


class HttpServerConfig(_ServerBase):
    transport: Literal["http"] = "http"
    """Streamable HTTP."""
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent on every request; values may be secret references."""


McpServerConfig = Annotated[StdioServerConfig | HttpServerConfig, Field(discriminator="transport")]


class McpConfig(BaseModel):
    """Every MCP server one worker may talk to, by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[Annotated[str, Field(pattern=SERVER_NAME_PATTERN)], McpServerConfig] = Field(default_factory=dict)

    def secret_names(self) -> set[str]:
        names: set[str] = set()
        for server in self.servers.values():
            values = server.env.values() if isinstance(server, StdioServerConfig) else server.headers.values()
            for value in values:
                names.update(secret_references(value))
        return names


_TRANSPORT_ALIASES = {"streamable-http": "http", "streamable_http": "http", "streamable-HTTP": "http"}


def parse_mcp_config(document: dict[str, Any], *, origin: str = "config") -> McpConfig:
    section = document.get("mcp", {})
    if not isinstance(section, dict):
        raise McpConfigError(f"{origin}: [mcp] must be a table")
    servers = section.get("servers", {})
    if not isinstance(servers, dict):
        raise McpConfigError(f"{origin}: [mcp.servers] must be a table")
    normalised: dict[str, Any] = {}
    for name, table in servers.items():
        if isinstance(table, dict) and table.get("transport") in _TRANSPORT_ALIASES:
            table = {**table, "transport": _TRANSPORT_ALIASES[table["transport"]]}
        normalised[name] = table
    try:
        return McpConfig(servers=normalised)
    except ValidationError as exc:
        detail = "; ".join(
            f"mcp.servers.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise McpConfigError(f"{origin}: {detail}") from None

