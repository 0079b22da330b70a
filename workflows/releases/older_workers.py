"""Model calls during a rolling upgrade, when yesterday's workers still poll the queue.

A request an older worker would misread goes out under an activity name only
workers that understand it register (``llm_activity``): an older worker never
takes it. Temporal retries such a task until an upgraded worker does; a call
whose every attempt met an older worker fails with the SDK's own "not
registered" error, and ``until_an_upgraded_worker_takes_it`` schedules it again
after a durable wait, for about two hours in all, rather than failing the run.
No patch id: which name a call takes follows from the request, whose shape
follows from recorded values (docs/upgrades.md).

Deterministic: each function only schedules activities and timers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ...contracts import LLMRequest
    from ...contracts.names import LLM_CALL, LLM_CALL_RESOLVING_TOOLS, LLM_CALL_STORED_RESULTS, LLM_CALL_TOOL_CATALOG

T = TypeVar("T")

UPGRADE_WAITS = (5, 30, 60, 120, 300, 600, 900, 900, 900, 900, 900, 900)
"""Seconds to wait, in turn, before scheduling again a model call whose every attempt met a worker that does
not register its name (about two hours in all): a rollout ends within that. Only a run that would otherwise
have failed takes them."""


def llm_activity(request: LLMRequest) -> str:
    """The name only workers that understand the request register (older ones never take it)."""
    if request.tool_names is not None:
        return LLM_CALL_RESOLVING_TOOLS
    if request.tools_ref is not None:
        return LLM_CALL_TOOL_CATALOG  # whose workers read stored_messages too
    return LLM_CALL_STORED_RESULTS if request.stored_messages else LLM_CALL


async def until_an_upgraded_worker_takes_it(name: str, schedule: Callable[[], Awaitable[T]]) -> T:
    """``schedule()`` (the activity ``name``), scheduled again after each of ``UPGRADE_WAITS`` while only
    workers that do not register ``name`` took it. ``llm.call``, which every worker registers, never waits."""
    for wait in (*UPGRADE_WAITS, None):
        try:
            return await schedule()
        except ActivityError as exc:
            if wait is None or name == LLM_CALL or not _not_registered(exc):
                raise
            # Every attempt met a worker from before this name (a rolling upgrade): wait for an upgraded one.
            workflow.logger.warning("%s: no upgraded worker took it; asking again in %d s", name, wait)
            await workflow.sleep(timedelta(seconds=wait))
    raise AssertionError("unreachable: the last round raises")


def _not_registered(exc: ActivityError) -> bool:
    """The SDK's own failure for an activity name the worker that took the task does not register."""
    cause = exc.cause
    return (
        isinstance(cause, ApplicationError)
        and cause.type == "NotFoundError"
        and "is not registered on this worker" in str(cause.message)
    )


__all__ = ["UPGRADE_WAITS", "llm_activity", "until_an_upgraded_worker_takes_it"]
