"""What can be known wrong about a server's config before contacting it (checked at worker start).

A missing command, a URL without a host, an unresolved secret or a missing
working directory will not fix themselves by retrying: the server is marked
``misconfigured`` (logged, shown in ``/readyz``), and only runs that use its
tools fail, typed, never unrelated ones.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx2

from ...contracts.config.mcp_config import HttpServerConfig, McpServerConfig, StdioServerConfig
from ...contracts.mcp import McpConfigError
from .secrets import SecretResolver


def config_problem(config: McpServerConfig, secrets: SecretResolver) -> str | None:
    """Why ``config`` cannot work, or None. Secret values never appear in the answer, only their names."""
    try:
        if isinstance(config, StdioServerConfig):
            secrets.resolve_all(config.env)
            return _command_problem(config)
        if isinstance(config, HttpServerConfig):
            secrets.resolve_all(config.headers)
            return _url_problem(config.url)
    except McpConfigError as exc:
        return str(exc)
    return None


def _command_problem(config: StdioServerConfig) -> str | None:
    if config.cwd is not None and not Path(config.cwd).is_dir():
        return f"cwd {config.cwd!r} is not a directory"
    command = config.command
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(config.cwd or ".", command) if not Path(command).is_absolute() else Path(command)
        if not path.is_file() or not os.access(path, os.X_OK):
            return f"command {command!r} is not an executable file"
        return None
    if shutil.which(command) is None:
        return f"command {command!r} is not found on PATH"
    return None


def _url_problem(url: str) -> str | None:
    try:
        parsed = httpx2.URL(url)
    except Exception as exc:  # httpx2 raises several types for unparsable URLs
        return f"url {url!r} is not a valid URL ({type(exc).__name__})"
    if not parsed.host:
        return f"url {url!r} has no host"
    return None
