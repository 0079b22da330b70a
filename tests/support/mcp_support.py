"""Helpers shared by the MCP tests: real tracker processes, configs and clients."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Iterator

from agentsteps.activities.mcp import McpSessionPool, McpToolClient, SecretResolver
from agentsteps.contracts.config.mcp_config import parse_mcp_config
from agentsteps.contracts.llm.tools import ToolCallInput
from agentsteps.examples.tickets.seed import seed

FIXED_NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
HOSTILE = str(Path(__file__).with_name("mcp_hostile_server.py"))


def new_token() -> str:
    return f"tk-{uuid.uuid4().hex}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seeded_db(directory: Path, *, issues: int = 300, seed_value: int = 11) -> Path:
    path = directory / f"tickets-{uuid.uuid4().hex[:6]}.db"
    seed(path, issues=issues, seed=seed_value, now=FIXED_NOW)
    return path


def stdio_tracker(db: Path, **extra: Any) -> dict[str, Any]:
    """A ``[mcp.servers.X]`` table launching the tracker; the token comes from secrets."""
    table = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "agentsteps.examples.tickets", "--transport", "stdio", "--db", str(db)],
        "env": {"TICKETS_API_TOKEN": "secret:TICKETS_API_TOKEN", "TICKETS_EXPECTED_TOKEN": "secret:TRACKER_EXPECTS"},
    }
    table.update(extra)
    return table


def http_tracker(port: int, **extra: Any) -> dict[str, Any]:
    table = {
        "transport": "streamable-http",
        "url": f"http://127.0.0.1:{port}/mcp",
        "headers": {"Authorization": "Bearer ${secret:TICKETS_API_TOKEN}"},
    }
    table.update(extra)
    return table


def hostile(**extra: Any) -> dict[str, Any]:
    table = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [HOSTILE],
        "env": {"HOSTILE_TOKEN": "secret:HOSTILE_TOKEN", "HOSTILE_MARKER": "secret:HOSTILE_MARKER"},
    }
    table.update(extra)
    return table


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)


def write_mcp_config(path: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """An ``agentsteps.toml`` declaring ``servers`` (tables as ``stdio_tracker``/``http_tracker`` build them;
    env, headers, timeouts and breaker as inline tables). The one writer of MCP config files in the tests."""
    lines = []
    for name, table in servers.items():
        lines.append(f"[mcp.servers.{name}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def make_client(servers: dict[str, dict[str, Any]], secrets: dict[str, str]) -> McpToolClient:
    config = parse_mcp_config({"mcp": {"servers": servers}})
    return McpToolClient(McpSessionPool(config, SecretResolver(env=secrets)))


def tool_call(name: str, arguments: dict[str, Any] | str = "{}", *, key: str | None = None) -> ToolCallInput:
    call_id = f"call-{uuid.uuid4().hex[:8]}"
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCallInput(name=name, arguments=text, call_id=call_id, idempotency_key=key or f"run-1/{call_id}")


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port}")


@contextmanager
def http_tracker_process(
    db: Path, port: int, token: str, *, env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen]:
    """The tracker over HTTP on ``port``; ``env`` replaces this process's environment, ``log`` keeps its output."""
    env = {**(os.environ if env is None else env), "TICKETS_EXPECTED_TOKEN": token}
    with log.open("w") if log else open(os.devnull, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentsteps.examples.tickets",
                "--transport",
                "http",
                "--db",
                str(db),
                "--port",
                str(port),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port)
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def child_pids(marker: str) -> list[int]:
    """Live children of this process whose command line contains ``marker``."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            state = stat.rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
