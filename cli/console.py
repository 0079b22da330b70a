"""``agentsteps console``: the web console alone, a client of the configured Temporal (docs/console.md)."""

from __future__ import annotations

import asyncio
import signal

from ..client.connection import connect
from ..client.dev_server import embedded_temporal
from ..console import running_console
from ..contracts.config.settings import WorkerSettings


async def run_console(settings: WorkerSettings) -> int:
    async with embedded_temporal(settings) as temporal:
        client = await connect(settings, temporal.address)
        console = settings.console
        if console.temporal_ui_url is None and temporal.ui_url:
            console = console.model_copy(update={"temporal_ui_url": temporal.ui_url})
        async with running_console(client, console, settings.prices) as url:
            print(f"Console:         {url}  (Temporal at {temporal.address}). Ctrl-C to stop.", flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
    return 0


__all__ = ["run_console"]
