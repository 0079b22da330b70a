"""Workers in their own processes, so tests can SIGKILL them mid-run."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def start_worker_process(script: Path, *args: object, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Run ``script`` with ``args`` and return once it printed ``ready``."""
    proc = subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=script.parent,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", "the worker process did not start"
    return proc


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


async def wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)
