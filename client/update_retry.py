"""An update sent again under its own id when the RPC's deadline passes before its answer.

Under load a turn can outlast the RPC that carries it: the server or the
transport gives up (``context deadline exceeded``) while the update is
admitted, running or done. Measured at 10,000 sessions on two cores
(``bench/fleet.py``), 8 of 33,000 turns were lost to the caller that way, and
5 more were refused busy because the caller, not knowing, sent the next turn
while the first still ran. Sending the update again under the same id is
safe where sending it under a new one is not: within a run the server
answers a repeated id with the first one's outcome and never runs it twice.

The caller's own cancellation is never retried: the SDK reports it as the
same error, with the ``CancelledError`` as its cause.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

T = TypeVar("T")

UPDATE_ATTEMPTS = 6
"""Sends of one update before its deadline error reaches the caller (backoff 0.5, 1, 2, 4, 8 s between)."""

_DEADLINE = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)


def _deadline_passed(exc: BaseException) -> bool:
    """The RPC ran out of time (a retry may find the answer); not the caller cancelling its own call."""
    cause = exc.__cause__ if isinstance(exc, WorkflowUpdateRPCTimeoutOrCancelledError) else exc
    return isinstance(cause, RPCError) and cause.status in _DEADLINE


async def until_answered(send: Callable[[str], Awaitable[T]], *, attempts: int = UPDATE_ATTEMPTS) -> T:
    """``send(update_id)`` until it answers, under one update id for every attempt."""
    update_id = str(uuid.uuid4())
    attempt = 0
    while True:
        try:
            return await send(update_id)
        except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError) as exc:
            attempt += 1
            if attempt == attempts or not _deadline_passed(exc):
                raise
        await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
