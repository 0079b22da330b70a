"""Serving the console: uvicorn in this process, beside whatever else it runs (``agentsteps dev``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import uvicorn
from temporalio.client import Client

from ..contracts.config.settings import ConsoleSettings, PriceTable
from .app import build_app
from .security import check_binding


class _Server(uvicorn.Server):
    """Leaves signals to the process that runs it (``agentsteps dev`` stops the worker gracefully first)."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def running_console(
    client: Client, settings: ConsoleSettings, prices: PriceTable | None = None
) -> AsyncIterator[str]:
    """The console listening (its URL yielded) until the block ends. Refuses an exposed binding first."""
    check_binding(settings)
    config = uvicorn.Config(
        build_app(client, settings, prices),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        proxy_headers=False,
        # A browser's open event stream must not hold a stop (dev's Ctrl-C, a test's end) for long.
        timeout_graceful_shutdown=2,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # a port in use: its error, now
            raise RuntimeError(f"the console did not start on {settings.host}:{settings.port}")
        await asyncio.sleep(0.05)
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    try:
        yield f"http://{host}:{settings.port}"
    finally:
        server.should_exit = True
        await task


__all__ = ["running_console"]
