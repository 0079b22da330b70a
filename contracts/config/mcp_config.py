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

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..llm.tools import Delivery
from ..mcp import McpConfigError

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


class McpBreaker(BaseModel):
    """The per-server circuit breaker: a hung or dead server is not retried into a pile of stuck calls."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failures: int = Field(default=3, ge=1, le=1000)
    """Infrastructure failures (unreachable, lost, timed out) in a row that open the circuit."""
    open_seconds: float = Field(default=5.0, gt=0, le=3600)
    """How long an open circuit fails calls at once before letting probes through (half-open)."""
    max_open_seconds: float = Field(default=120.0, gt=0, le=86400)
    """Each failed probe doubles the open period, up to this (a dead stdio server is restarted with backoff)."""
    half_open_probes: int = Field(default=1, ge=1, le=100)
    """Calls let through at once while half-open; one success closes the circuit."""

    @model_validator(mode="after")
    def _open_within_max(self) -> McpBreaker:
        if self.max_open_seconds < self.open_seconds:
            raise ValueError("max_open_seconds must be at least open_seconds")
        return self


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    required: bool = False
    """A required server that is not up makes ``/readyz`` answer 503; an optional one only shows there."""
    tools: list[Annotated[str, Field(min_length=1, max_length=128)]] | None = None
    """The tools this server serves (its names, before ``tool_prefix``). Set, a run naming other tools never
    contacts it, and only these are offered; unset, it is asked for names no other server is known to serve."""
    catalog_ttl_seconds: float = Field(default=300.0, gt=0, le=86400 * 7)
    """The tool list is fetched again after this long (and at once on ``notifications/tools/list_changed``)."""
    give_up_seconds: float = Field(default=60.0, gt=0, le=86400)
    """How long runs using this server's tools retry while it is down; past it they fail with
    ``McpServerDownError`` (not retried)."""
    max_concurrent_calls: int = Field(default=16, ge=1, le=10000)
    """Calls in flight to this server at once; further calls wait up to ``call_seconds`` for a slot."""
    breaker: McpBreaker = Field(default_factory=McpBreaker)

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


def _key(loc: tuple[Any, ...]) -> str:
    """``servers.x.stdio.breaker.failures`` (pydantic's path) as the operator wrote it: ``x.breaker.failures``."""
    parts = list(loc[1:] if loc[:1] == ("servers",) else loc)
    if len(parts) > 1 and parts[1] in ("stdio", "http"):  # the transport union's tag, not a key in the file
        del parts[1]
    return ".".join(str(p) for p in parts)


def _toml_value(value: object) -> object:
    """A TOML date or time, which no setting is: kept apart from text, so strict validation refuses it."""
    return {"toml_datetime": str(value)}


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
        # Strict, as the [worker] table: "3" or true where a number belongs is refused, naming the key.
        return McpConfig.model_validate_json(json.dumps({"servers": normalised}, default=_toml_value), strict=True)
    except ValidationError as exc:
        detail = "; ".join(f"mcp.servers.{_key(err['loc'])}: {err['msg']}" for err in exc.errors())
        raise McpConfigError(f"{origin}: {detail}") from None


__all__ = [
    "HttpServerConfig",
    "McpBreaker",
    "McpConfig",
    "McpTimeouts",
    "parse_mcp_config",
    "StdioServerConfig",
]
