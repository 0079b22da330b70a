"""Workers in their own processes, so tests can SIGKILL them mid-run."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

STICKY_AFTER_KILL = {"AGENTSTEPS_TEST_STICKY_SECONDS": "2"}
"""The environment of a worker the test SIGKILLs (``start_worker_process(..., env=STICKY_AFTER_KILL)``):
its runs' next workflow tasks, queued on its sticky queue, go to the normal queue (and so to the next
worker) 2 s after they are queued instead of Temporal's default 10. What moves a run off a dead worker
is the same, only sooner; a live worker that misses the 2 s under load replays the run from history."""


def start_worker_process(script: Path, *args: object, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Run ``script`` with ``args`` and return once it printed ``ready``.

    In a process group of its own, so ``kill`` ends it with its children, as killing a pod or a
    container does: an orphaned sandbox process would otherwise go on spinning a killed program
    for seconds, taking the CPU the test's next worker needs."""
    proc = subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=script.parent,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", "the worker process did not start"
    return proc


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the process and every process of its group (its MCP servers, its sandbox processes)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


async def wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)
