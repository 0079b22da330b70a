"""Turns ``[mcp.servers.NAME]`` tables (already read from the config file by
``client/settings.py``) into an ``McpConfig``.

    [mcp.servers.tickets]
    transport = "stdio"
    command = "python"
    args = ["-m", "agentsteps.examples.tickets", "--db", "tickets.db", "--token-file", "/run/secrets/tickets"]
    env = { TICKETS_API_TOKEN = "secret:TICKETS_API_TOKEN" }

    [mcp.servers.tracker_http]
    transport = "http"               # streamable HTTP; "streamable-http" is accepted too
    url = "http://127.0.0.1:8765/mcp"
    headers = { Authorization = "Bearer ${secret:TICKETS_API_TOKEN}" }
    tool_prefix = "remote_"
    timeouts = { call_seconds = 30 }
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ...contracts.config.mcp_config import McpConfig
from ...contracts.mcp import McpConfigError

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

