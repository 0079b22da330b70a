"""The one main of every worker a test runs in a child process (so the test can SIGKILL it).

The parent (``process_support.start_worker_process``) waits for the line
``ready``; the child then serves until it is killed. It leaves through
``os._exit`` after flushing (temporalio issue #300: a process that used a
Temporal client can abort at interpreter exit).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, NoReturn


def worker_options() -> dict[str, Any]:
    """``Worker`` options a test sets through the child's environment.

    ``AGENTSTEPS_TEST_NO_CACHE=1``: no sticky cache, so each workflow task may go to any worker (the
    time-skipping test server never moves a dead worker's sticky tasks elsewhere).
    ``AGENTSTEPS_TEST_STICKY_SECONDS``: ``process_support.STICKY_AFTER_KILL``.
    """
    options: dict[str, Any] = {"max_cached_workflows": 0} if os.environ.get("AGENTSTEPS_TEST_NO_CACHE") else {}
    if sticky := os.environ.get("AGENTSTEPS_TEST_STICKY_SECONDS"):
        options["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=float(sticky))
    return options


async def serve_until_killed(*more_lines: object) -> None:
    """Print ``ready`` (then ``more_lines``, e.g. a port) and wait; call inside the worker's context."""
    for line in ("ready", *more_lines):
        print(line, flush=True)
    await asyncio.Event().wait()


def run_child(main: Callable[..., Awaitable[None]], *args: str) -> NoReturn:
    """Run ``main(*args)`` as this process's whole life, then leave without interpreter teardown."""
    try:
        asyncio.run(main(*args))
    finally:
        sys.stdout.flush()
        os._exit(0)
