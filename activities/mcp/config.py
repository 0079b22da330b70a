"""Reads ``[mcp.servers.NAME]`` tables from a TOML file into an ``McpConfig``.

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

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...contracts.config.mcp_config import McpConfig
from ...contracts.mcp import McpConfigError

CONFIG_ENV = "AGENTSTEPS_CONFIG"
DEFAULT_CONFIG_FILE = "agentsteps.toml"
_TRANSPORT_ALIASES = {"streamable-http": "http", "streamable_http": "http", "streamable-HTTP": "http"}


def default_config_path() -> Path | None:
    """``$AGENTSTEPS_CONFIG``, else ``./agentsteps.toml`` when it exists."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit)
    local = Path(DEFAULT_CONFIG_FILE)
    return local if local.is_file() else None


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


def load_mcp_config(path: str | Path | None = None) -> McpConfig:
    """The MCP section of ``path`` (or the default file); an empty config when there is no file."""
    resolved = Path(path) if path is not None else default_config_path()
    if resolved is None:
        return McpConfig()
    try:
        document = tomllib.loads(resolved.read_text())
    except FileNotFoundError:
        raise McpConfigError(f"config file {resolved} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise McpConfigError(f"{resolved}: not valid TOML: {exc}") from None
    return parse_mcp_config(document, origin=str(resolved))
