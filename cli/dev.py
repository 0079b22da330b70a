"""Long-running processes: ``agentsteps dev`` (embedded stack) and ``agentsteps worker``."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

from temporalio.client import Client

from ..contracts.config.settings import WorkerSettings
from ..client.dev_server import embedded_temporal
from ..console import running_console
from ..telemetry.server import start_metrics_server
from ..worker import build_mcp, check_deployment, connect, running_worker, settle_heap


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _serve(client: Client, settings: WorkerSettings, banner: list[str]) -> None:
    """Worker plus /metrics until SIGINT or SIGTERM; /readyz turns ready once the worker polls
    and every required MCP server is up, and shows each server's state.

    A stop is graceful: /readyz turns 503 first, then the worker stops polling
    and lets running activities finish for ``graceful_shutdown_seconds``
    (leaving ``running_worker`` shuts the Temporal worker down), then exits.
    """
    ready = threading.Event()
    mcp = build_mcp(settings)
    metrics = start_metrics_server(
        settings.metrics_port, ready=lambda: ready.is_set() and mcp.fleet.ready(),
        details=lambda: {"mcp_servers": mcp.fleet.report()},
    )
    try:
        async with running_worker(client, settings, mcp=mcp):
            settle_heap()
            ready.set()
            print("\n".join(banner), flush=True)
            await _until_stopped()
            ready.clear()
            print(
                f"stopping: no new tasks; running activities get up to {settings.graceful_shutdown_seconds:g} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        metrics.stop()


async def run_dev(settings: WorkerSettings) -> int:
    async with embedded_temporal(settings) as temporal:
        client = await connect(settings, temporal.address)
        console = settings.console
        if console.temporal_ui_url is None and temporal.ui_url:
            console = console.model_copy(update={"temporal_ui_url": temporal.ui_url})
        # Before the worker, so a refused binding (beyond loopback, no token) stops dev at once.
        async with running_console(client, console, settings.prices) as console_url:
            banner = [f"Temporal server: {temporal.address}"]
            if temporal.ui_url:
                banner.append(f"Temporal UI:     {temporal.ui_url}")
            banner += [
                f"Console:         {console_url}",
                f"Metrics:         http://localhost:{settings.metrics_port}/metrics",
                f"Worker polling task queue {settings.task_queue!r}. Ctrl-C to stop.",
            ]
            await _serve(client, settings, banner)
    return 0


async def run_worker_only(settings: WorkerSettings) -> int:
    check_deployment(settings)
    if settings.tool_factories is None:
        # A production worker offers only the tools its operator configured; demo tools are for demo and dev.
        settings = settings.model_copy(update={"tool_factories": []})
    client = await connect(settings)
    await _serve(client, settings, [f"worker on {settings.task_queue!r}, metrics on :{settings.metrics_port}"])
    return 0
