"""Paused programs kept live on this worker between calls, a bounded LRU of checked-out interpreters.

A live program answers its next ``code.resume`` with no load and no store write: the interpreter is
still paused in its own Monty process. The cache is only an accelerator: an evicted, crashed or
never-seen program is rebuilt by deterministic replay (``driver.SegmentDriver.replay``) from its source
and the outcomes its calls had, which the workflow holds. Each entry holds one Monty process (a few MB,
no CPU while paused), so the cache is bounded: ``LIVE_PROGRAMS`` per worker, least recently used out
first. An entry is taken (removed) when it is resumed, so two attempts never share one interpreter.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic_monty import AsyncMontySession

from .driver import OutputSink

LIVE_PROGRAMS = 16
"""Paused programs a worker keeps live (one Monty process each). Beyond it the least recently used is
closed; its next resume replays it. Sized for the programs a worker drives at once, not for the ones
waiting days (those are replayed, or loaded from the snapshot taken before a long wait)."""


@dataclass
class LiveProgram:
    session: AsyncMontySession
    paused: Any
    """The interpreter's ``AsyncFutureSnapshot``: waiting on the calls it awaits."""
    sink: OutputSink
    """The print callback the feed was started with (it stays bound to the interpreter)."""
    close: Callable[[], Awaitable[None]]


class LivePrograms:
    def __init__(self, capacity: int = LIVE_PROGRAMS) -> None:
        self.capacity = capacity
        self._programs: OrderedDict[tuple[str, str], LiveProgram] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._programs)

    def take(self, run_key: str, live: str) -> LiveProgram | None:
        program = self._programs.pop((run_key, live), None)
        if program is None:
            self.misses += 1
        else:
            self.hits += 1
        return program

    async def keep(self, run_key: str, live: str, program: LiveProgram) -> None:
        self._programs[(run_key, live)] = program
        while len(self._programs) > self.capacity:
            await self.evict_one()

    async def evict_one(self) -> bool:
        if not self._programs:
            return False
        _, program = self._programs.popitem(last=False)
        with contextlib.suppress(Exception):  # a crashed interpreter is already gone
            await program.close()
        return True

    async def close(self) -> None:
        while await self.evict_one():
            pass
