"""Long-running processes: ``agentsteps dev`` (embedded stack) and ``agentsteps worker``.

``dev`` says what it found and what it started, refuses what it cannot use
(``TEMPORAL_ADDRESS`` set, a port held by something else, another worker
already on its task queue) and never hangs: when the Temporal server stops
answering for ``server_lost_seconds`` (10 s) it says so and exits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import socket
import sys
import threading
from datetime import timedelta

from temporalio.client import Client

from ..activities.tools.registry import ToolRegistry
from ..client.dev_server import Stack, embedded_temporal
from ..console import running_console
from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import StackConflictError
from ..telemetry.server import start_metrics_server
from ..worker import (
    QueueCheck,
    build_mcp,
    check_snapshot_key,
    connect,
    load_registry,
    production_settings,
    returning_freed_memory,
    running_worker,
    settle_heap,
)
from . import hard_stop
from .offline import offline_script_text, wants_offline, worker_models
from .stop_signal import stop_event
from .workers import fingerprint, live_pollers, worker_identity

HEALTH_EVERY_SECONDS = 2.0
EXIT_SERVER_LOST = 3


class ServerLost(Exception):
    """The Temporal server stopped answering."""


def _stopping(settings: WorkerSettings) -> None:
    hard_stop.waiting_for(
        "the worker's shutdown: the Temporal SDK's Worker.shutdown(), which waits until every running activity "
        "has finished or accepted its cancellation, then MCP sessions and sandboxes closing"
    )
    print(
        f"stopping: no new tasks; running activities get up to {settings.graceful_shutdown_seconds:g} s",
        file=sys.stderr,
        flush=True,
    )


async def _until_stopped(client: Client, address: str, stop: asyncio.Event, lost_after: float) -> None:
    """Until ``stop`` (SIGINT or SIGTERM); raises ``ServerLost`` when the server has not answered for
    ``lost_after`` seconds (asked every 2 s, or four times within a shorter ``lost_after``)."""
    loop = asyncio.get_running_loop()
    silent_since: float | None = None
    every = min(HEALTH_EVERY_SECONDS, lost_after / 4)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except asyncio.TimeoutError:
            pass
        try:
            await client.service_client.check_health(timeout=timedelta(seconds=2))
            silent_since = None
        except Exception as exc:  # any failure to answer counts; the clock decides
            now = loop.time()
            silent_since = silent_since or now
            if now - silent_since >= lost_after:
                raise ServerLost(
                    f"the Temporal server at {address} has not answered for "
                    f"{lost_after:g} s ({type(exc).__name__}); stopping"
                ) from None


async def _serve(
    client: Client,
    settings: WorkerSettings,
    banner: list[str],
    address: str,
    stop: asyncio.Event,
    *,
    registry: ToolRegistry,
    identity: str,
    queue_check: QueueCheck | None = None,
) -> int:
    """Worker plus /metrics until SIGINT or SIGTERM; /readyz turns ready once the worker polls
    and every required MCP server is up, and shows each server's state.

    A stop is graceful: /readyz turns 503 first, then the worker stops polling
    and lets running activities finish for ``graceful_shutdown_seconds``
    (leaving ``running_worker`` shuts the Temporal worker down), then exits.
    A shutdown that never returns is ended by ``hard_stop``'s deadline.
    """
    if stop.is_set():  # stopped while connecting: never poll at all
        _stopping(settings)
        return 0
    ready = threading.Event()
    mcp = build_mcp(settings)
    metrics = start_metrics_server(
        settings.metrics_port,
        ready=lambda: ready.is_set() and mcp.fleet.ready(),
        details=lambda: {"mcp_servers": mcp.fleet.report()},
    )
    lost: ServerLost | None = None
    try:
        check = _stopping_when_replaced(queue_check or QueueCheck(), stop)
        async with (
            running_worker(client, settings, mcp=mcp, registry=registry, identity=identity, queue_check=check),
            returning_freed_memory(),
        ):
            settle_heap()
            ready.set()
            print("\n".join(banner), flush=True)
            try:
                await _until_stopped(client, address, stop, settings.server_lost_seconds)
            except ServerLost as exc:
                lost = exc
                print(f"error: {lost}", file=sys.stderr, flush=True)
            finally:
                ready.clear()
            if lost is None:
                _stopping(settings)
        hard_stop.waiting_for("the metrics server, and for dev the console and the embedded Temporal server, to stop")
    except asyncio.CancelledError:
        # With its server gone the SDK's worker fails fatally and cancels the task inside its
        # ``async with``, even while that task is already shutting it down: the end we chose.
        if lost is None:
            raise
        this_task = asyncio.current_task()
        assert this_task is not None  # a coroutine runs in a task
        this_task.uncancel()
    except Exception:
        if lost is None:
            raise
    finally:
        metrics.stop()
    return EXIT_SERVER_LOST if lost else 0


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


async def run_dev(settings: WorkerSettings) -> int:
    # First: a stop while starting drains, never kills.
    stop = stop_event(settings.graceful_shutdown_seconds, settings.stop_margin_seconds)
    if settings.temporal_address:
        raise StackConflictError(
            f"agentsteps dev runs the embedded stack on this machine, but TEMPORAL_ADDRESS is set "
            f"({settings.temporal_address}). To serve that cluster run `agentsteps worker` (it checks the "
            "deployment first); to use the embedded stack, unset TEMPORAL_ADDRESS."
        )
    if not _port_free(settings.console.port):
        raise StackConflictError(
            f"the console port {settings.console.port} is in use (another agentsteps dev or console?). "
            "Stop it, or choose another: agentsteps dev --console-port N (AGENTSTEPS_CONSOLE_PORT)."
        )
    if not _port_free(settings.metrics_port):
        raise StackConflictError(
            f"the metrics port {settings.metrics_port} is in use (another agentsteps dev or worker?). "
            "Stop it, or choose another: agentsteps dev --metrics-port N (AGENTSTEPS_METRICS_PORT)."
        )
    async with embedded_temporal(settings) as temporal:
        print(temporal.describe(), file=sys.stderr, flush=True)
        client = await connect(settings, temporal.address)
        pollers = await live_pollers(client, settings.task_queue)
        if pollers:
            raise StackConflictError(
                f"a worker already polls task queue {settings.task_queue!r} on {temporal.address} "
                f"({pollers[0].identity}): is another `agentsteps dev` running? Stop it and start this one, or use "
                "that one; two workers on one queue must serve the same tools and models."
            )
        registry = load_registry(settings)
        offline = wants_offline(settings)
        digest = hashlib.sha256(offline_script_text().encode()).hexdigest()[:12] if offline else None
        config = fingerprint(settings, registry, digest)
        console = settings.console
        if console.temporal_ui_url is None and temporal.ui_url:
            console = console.model_copy(update={"temporal_ui_url": temporal.ui_url})
        # Before the worker, so a refused binding (beyond loopback, no token) stops dev at once.
        async with running_console(client, console, settings.prices) as console_url:
            with worker_models(settings) as models:
                return await _serve(
                    client,
                    models.settings,
                    _dev_banner(temporal, settings, models.note, console_url),
                    temporal.address,
                    stop,
                    registry=registry,
                    identity=worker_identity("dev", config),
                    queue_check=QueueCheck(offline_script=digest),
                )


def _dev_banner(temporal: Stack, settings: WorkerSettings, models: str, console_url: str) -> list[str]:
    lines = [
        f"Temporal server: {temporal.address} "
        f"({'started by this command' if temporal.started_here else 'found running; not started here'})"
    ]
    if temporal.ui_url:
        lines.append(f"Temporal UI:     {temporal.ui_url}")
    lines += [
        f"Console:         {console_url}",
        f"Metrics:         http://localhost:{settings.metrics_port}/metrics",
        f"Models:          {models}",
        f"Worker polling task queue {settings.task_queue!r}; other agentsteps commands use it. Ctrl-C to stop.",
    ]
    if settings.dev_port != 7233:
        lines.append(f"Other terminals find this stack with: export AGENTSTEPS_DEV_PORT={settings.dev_port}")
    return lines


def _stopping_when_replaced(check: QueueCheck, stop: asyncio.Event) -> QueueCheck:
    """Another fleet took the queue over (``--replace-fleet``): this worker stops as on SIGTERM."""

    async def replaced(why: str) -> None:
        print(f"error: {why}", file=sys.stderr, flush=True)
        stop.set()

    return dataclasses.replace(check, on_replaced=replaced)


async def run_worker_only(settings: WorkerSettings, *, replace_fleet: bool = False) -> int:
    # First: in place before connecting, polling or the banner.
    stop = stop_event(settings.graceful_shutdown_seconds, settings.stop_margin_seconds)
    settings = production_settings(settings)
    await check_snapshot_key(settings)
    client = await connect(settings)
    registry = load_registry(settings)
    identity = worker_identity("worker", fingerprint(settings, registry))
    return await _serve(
        client,
        settings,
        [f"worker on {settings.task_queue!r}, metrics on :{settings.metrics_port}"],
        settings.temporal_address or f"127.0.0.1:{settings.dev_port}",
        stop,
        registry=registry,
        identity=identity,
        queue_check=QueueCheck(replace=replace_fleet),
    )
