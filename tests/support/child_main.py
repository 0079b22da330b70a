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
from typing import NoReturn


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
