"""Temporal billable actions of one run, counted from its history (what Temporal Cloud bills).

Workflow tasks are free; the run's start, each activity scheduled, marker,
search-attribute upsert, timer, signal, accepted update and child workflow is
one action. The start is counted so the totals compare with a bill.
``history_bytes`` (the events' encoded size) is not an action and not in ``total``.
"""

from __future__ import annotations

from collections import Counter

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

BILLABLE = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED: "start",
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activities",
    EventType.EVENT_TYPE_MARKER_RECORDED: "markers",
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upserts",
    EventType.EVENT_TYPE_TIMER_STARTED: "timers",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signals",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "updates",
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: "children",
}


async def billable_actions(client: Client, workflow_id: str) -> dict[str, int]:
    """``{"total": n, "activities": a, "markers": m, ...}`` for the run's history (kinds that occurred)."""
    counts: Counter[str] = Counter()
    size = 0
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        size += event.ByteSize()
        kind = BILLABLE.get(event.event_type)
        if kind is not None:
            counts[kind] += 1
    return {"total": sum(counts.values()), **dict(sorted(counts.items())), "history_bytes": size}
