"""The third MCP server of the fleet tests (``mcp_fleet_server.py``): taken down, hung, changed, brought back."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentsteps.telemetry.metrics import REGISTRY

FLEET_SERVER = str(Path(__file__).with_name("mcp_fleet_server.py"))


class Control:
    """The files ``mcp_fleet_server.py`` reads on every request."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)

    def set(self, flag: str, on: bool = True) -> None:
        path = self.dir / flag
        if on:
            path.write_text("1")
        else:
            path.unlink(missing_ok=True)

    def offer(self, *names: str) -> None:
        (self.dir / "tools").write_text(json.dumps(list(names)))


def fleet_server(control: Control, **extra: Any) -> dict[str, Any]:
    table: dict[str, Any] = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [FLEET_SERVER],
        "env": {"FLEET_CONTROL": str(control.dir)},
    }
    table.update(extra)
    return table


def unique(name: str) -> str:
    """Server names are metric labels: one per test keeps the counters of two tests apart."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


def sample(metric: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


async def eventually(check: Callable[[], Awaitable[bool] | bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.1)
