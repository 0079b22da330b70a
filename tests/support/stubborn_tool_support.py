"""A user tool written badly, for ``tests/e2e/test_stop_deadline.py``: loaded by a real ``agentsteps worker``
through ``tool_factories = ["stubborn_tool_support:build_registry"]``.

``slow_lookup`` behaves as ``$STUBBORN_TOOL_MODE`` says:

- ``swallow``: sleeps, and catches ``asyncio.CancelledError`` and sleeps on (the bug:
  the SDK's ``Worker.shutdown()`` then waits for it forever);
- ``honour``: sleeps until cancelled, then lets the cancellation through;
- ``quick``: answers at once.

Each start and each cancellation is a line in ``$STUBBORN_TOOL_LOG``, so the
test knows when a call is running before it sends a signal.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel, Field

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts.config.settings import WorkerSettings


class LookupArgs(BaseModel):
    key: str = Field(max_length=20)


class Found(BaseModel):
    value: str


def build_registry(settings: WorkerSettings) -> ToolRegistry:
    registry = ToolRegistry()
    mode = os.environ.get("STUBBORN_TOOL_MODE", "quick")
    log = Path(os.environ["STUBBORN_TOOL_LOG"])

    def note(line: str) -> None:
        with log.open("a") as f:
            f.write(f"{line}\n")

    @registry.tool()
    async def slow_lookup(args: LookupArgs) -> Found:
        """Look a key up in the slow back office."""
        note(f"start {mode}")
        if mode == "quick":
            return Found(value=f"{args.key}: found")
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                note(f"cancelled {mode}")
                if mode == "honour":
                    raise
                # "swallow": the badly written part, it carries on regardless.

    return registry
