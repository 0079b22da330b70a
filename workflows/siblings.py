"""Calls that run together end together: when one fails, the others are cancelled.

A step's tool calls (tool loop) and a program's pending calls (code mode) run
concurrently. ``asyncio.gather`` hands back the first failure at once and
leaves the rest running, so a turn failed by one call left its siblings
working with no one to read their results, and a sibling waiting for approval
stayed in the session's pending list (``approve`` then ran it with no turn).
Here the others are cancelled: an activity gets a cancel request, a call
waiting for approval is withdrawn (``ApprovalDesk.gate``).

``cancel_siblings`` is asked only when a call has failed, so runs that never
fail keep their commands; runs recorded before the change replay without the
cancellations (``SESSION_STATE_PATCH``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


async def together(calls: Iterable[Awaitable[T]], cancel_siblings: Callable[[], bool]) -> list[T]:
    """``gather`` of ``calls``; on the first failure, the unfinished ones are cancelled before it is raised."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except GeneratorExit:
        raise  # closed by the garbage collector: no workflow call here (``cancel_siblings`` may ask a patch)
    except BaseException:
        await cancel_unfinished(tasks, cancel_siblings)
        raise


async def cancel_unfinished(tasks: Iterable[asyncio.Future[T]], cancel_siblings: Callable[[], bool]) -> None:
    """Cancel what is still running (when ``cancel_siblings()`` says so) and wait until each has ended."""
    running = [task for task in tasks if not task.done()]
    if not running or not cancel_siblings():
        return
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


__all__ = ["cancel_unfinished", "together"]
