"""Long-running processes: ``agentsteps dev`` (embedded stack) and ``agentsteps worker``."""

from __future__ import annotations

import asyncio
import sys
import threading

from temporalio.client import Client

from ..contracts.config.settings import WorkerSettings
from ..client.dev_server import embedded_temporal
from ..telemetry.server import start_metrics_server
from .stop_signal import stop_event
from ..worker import build_mcp, check_deployment, check_snapshot_key, connect, running_worker, settle_heap


def _stopping(settings: WorkerSettings) -> None:
    print(
        f"stopping: no new tasks; running activities get up to {settings.graceful_shutdown_seconds:g} s",
        file=sys.stderr,
        flush=True,
    )


async def _serve(client: Client, settings: WorkerSettings, banner: list[str], stop: asyncio.Event) -> None:
    """Worker plus /metrics until SIGINT or SIGTERM; /readyz turns ready once the worker polls
    and every required MCP server is up, and shows each server's state.

    A stop is graceful: /readyz turns 503 first, then the worker stops polling
    and lets running activities finish for ``graceful_shutdown_seconds``
    (leaving ``running_worker`` shuts the Temporal worker down), then exits.
    """
    if stop.is_set():  # stopped while connecting: never poll at all
        _stopping(settings)
        return
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
            await stop.wait()
            ready.clear()
            _stopping(settings)
    finally:
        metrics.stop()


async def run_dev(settings: WorkerSettings) -> int:
    stop = stop_event()
    async with embedded_temporal(settings) as temporal:
        client = await connect(settings, temporal.address)
        banner = [f"Temporal server: {temporal.address}"]
        if temporal.ui_url:
            banner.append(f"Temporal UI:     {temporal.ui_url}")
        banner += [
            f"Metrics:         http://localhost:{settings.metrics_port}/metrics",
            f"Worker polling task queue {settings.task_queue!r}. Ctrl-C to stop.",
        ]
        await _serve(client, settings, banner, stop)
    return 0


async def run_worker_only(settings: WorkerSettings) -> int:
    stop = stop_event()  # first: the handler is in place before connecting, polling or the banner
    check_deployment(settings)
    await check_snapshot_key(settings)
    if settings.tool_factories is None:
        # A production worker offers only the tools its operator configured; demo tools are for demo and dev.
        settings = settings.model_copy(update={"tool_factories": []})
    client = await connect(settings)
    await _serve(client, settings, [f"worker on {settings.task_queue!r}, metrics on :{settings.metrics_port}"], stop)
    return 0
