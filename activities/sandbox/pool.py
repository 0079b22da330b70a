"""A long-lived pool of Monty interpreter processes, with our own counters.

A session is held while an activity drives a program segment, and while a
paused program is kept live between its calls (``live.LivePrograms``, bounded);
the pool has room for both, so a live program never makes a segment wait.
``checked_out`` counts sessions in an activity right now, ``live`` the paused
programs kept (tests assert the first is zero while a program waits on a tool).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from pydantic_monty import AsyncMonty, AsyncMontySession

from .live import LIVE_PROGRAMS, LivePrograms


class SandboxPool:
    def __init__(
        self,
        *,
        max_processes: int | None = None,
        request_timeout: float = 120.0,
        live_programs: int = LIVE_PROGRAMS,
    ) -> None:
        self._max_processes = max_processes or os.cpu_count() or 1
        self._request_timeout = request_timeout
        self._pool: AsyncMonty | None = None
        self._lock = asyncio.Lock()
        self.checked_out = 0
        """Sessions in use by an activity right now."""
        self.checkouts_total = 0
        self.live = LivePrograms(live_programs)
        """Paused programs kept live between calls (each holds one process of the pool)."""

    async def _ensure(self) -> AsyncMonty:
        # Started lazily inside the worker's event loop, which owns the pool's I/O.
        async with self._lock:
            if self._pool is None:
                pool = AsyncMonty(
                    min_processes=1,
                    max_processes=self._max_processes + self.live.capacity,
                    request_timeout=self._request_timeout,
                )
                await pool.__aenter__()
                self._pool = pool
            return self._pool

    @contextlib.asynccontextmanager
    async def session(self, **checkout: Any) -> AsyncIterator[AsyncMontySession]:
        held = await self.open(**checkout)
        try:
            yield held.session
        finally:
            await held.close()

    async def open(self, **checkout: Any) -> Checkout:
        """A session that may outlive the caller's block (kept live); ``close`` returns its process."""
        pool = await self._ensure()
        manager = pool.checkout(**checkout)
        session = await manager.__aenter__()
        self.checked_out += 1
        self.checkouts_total += 1
        return Checkout(self, session, manager)

    async def close(self) -> None:
        await self.live.close()
        async with self._lock:
            if self._pool is not None:
                pool, self._pool = self._pool, None
                await pool.__aexit__(None, None, None)


class Checkout:
    """One checked-out session: counted in ``checked_out`` until ``detach`` (kept live) or ``close``."""

    def __init__(self, pool: SandboxPool, session: AsyncMontySession, manager: Any) -> None:
        self._pool = pool
        self.session = session
        self._manager = manager
        self._counted = True
        self._closed = False

    def detach(self) -> None:
        if self._counted:
            self._counted = False
            self._pool.checked_out -= 1

    async def close(self) -> None:
        self.detach()
        if not self._closed:
            self._closed = True
            await self._manager.__aexit__(None, None, None)
