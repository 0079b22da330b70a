"""A long-lived pool of Monty interpreter processes, with our own counters.

A session is held only while an activity drives a program segment; between
segments the program is a snapshot in the payload store. ``checked_out`` makes
that observable (tests assert it is zero while a program waits on a tool).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pydantic_monty import AsyncMonty, AsyncMontySession


class SandboxPool:
    def __init__(self, *, max_processes: int | None = None, request_timeout: float = 120.0) -> None:
        self._max_processes = max_processes
        self._request_timeout = request_timeout
        self._pool: AsyncMonty | None = None
        self._lock = asyncio.Lock()
        self.checked_out = 0
        """Sessions in use right now."""
        self.checkouts_total = 0

    async def _ensure(self) -> AsyncMonty:
        # Started lazily inside the worker's event loop, which owns the pool's I/O.
        async with self._lock:
            if self._pool is None:
                pool = AsyncMonty(
                    min_processes=1, max_processes=self._max_processes, request_timeout=self._request_timeout
                )
                await pool.__aenter__()
                self._pool = pool
            return self._pool

    @contextlib.asynccontextmanager
    async def session(self, **checkout: Any) -> AsyncIterator[AsyncMontySession]:
        pool = await self._ensure()
        async with pool.checkout(**checkout) as session:
            self.checked_out += 1
            self.checkouts_total += 1
            try:
                yield session
            finally:
                self.checked_out -= 1

    async def close(self) -> None:
        async with self._lock:
            if self._pool is not None:
                pool, self._pool = self._pool, None
                await pool.__aexit__(None, None, None)
