"""A running source's calls with side effects that have not settled: unknown to a fork, never absent.

A fork of a run that is still open reads the effects the source made from its
history: every side-effecting ``tools.call`` that completed. A call the source
has scheduled and not yet seen complete (the tool may be running, may have
charged the card and not answered yet) is in neither list, so without this
module the fork's model would make it again under the fork's own key. Here the
fork first waits for such calls to settle (``wait`` seconds at most, reading the
history again), so that it sees the source's real outcome; a call still
unsettled after that is given to the fork as an effect whose outcome is
unknown (``EffectRecord.outcome = "unknown"``, the source's own key), which the
fork's model is told and which an identical call is answered from: it is never
sent again from the fork.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter

from ..contracts import EffectRecord, ToolCallInput, ToolCallResult, ToolSchema
from ..contracts.llm.arguments import canonical_arguments, cap
from ..contracts.llm.tools import OUTCOME_UNKNOWN
from ..contracts.names import TOOLS_CALL
from .replay_check import fetch_history

POLL_SECONDS = 0.25

_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}


@dataclass(frozen=True)
class UnsettledCall:
    """A ``tools.call`` the source scheduled whose outcome its history does not hold yet."""

    scheduled_event_id: int
    call: ToolCallInput


async def unsettled_calls(history: WorkflowHistory, converter: DataConverter) -> list[UnsettledCall]:
    """Every ``tools.call`` scheduled and not completed, failed, timed out or cancelled, in order."""
    scheduled: dict[int, Payloads] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == TOOLS_CALL:
                scheduled[event.event_id] = attrs.input
        elif event.event_type in _CLOSED:
            scheduled.pop(getattr(event, _CLOSED[event.event_type]).scheduled_event_id, None)
    out = []
    for event_id, payloads in scheduled.items():
        decoded = await converter.decode(list(payloads.payloads), [ToolCallInput])
        out.append(UnsettledCall(event_id, decoded[0]))
    return out


def with_side_effects(calls: list[UnsettledCall], schemas: list[ToolSchema]) -> list[UnsettledCall]:
    """A call without side effects may simply be made again: only these need settling."""
    effectful = {s.name for s in schemas if s.side_effects}
    return [c for c in calls if c.call.name in effectful]


async def wait_to_settle(
    client: Client,
    workflow_id: str,
    history: WorkflowHistory,
    calls: list[UnsettledCall],
    *,
    converter: DataConverter,
    wait: float,
) -> WorkflowHistory:
    """The source's history once ``calls`` have settled, or after ``wait`` seconds (the latest read either way).

    Only the calls unsettled at the start are waited for: a source that goes on makes new calls, and a
    fork does not chase them (they are unknown to it, as any call still unsettled at its last read)."""
    waiting = {c.scheduled_event_id for c in calls}
    deadline = time.monotonic() + wait
    while waiting and time.monotonic() < deadline and not _closed(history):
        await asyncio.sleep(POLL_SECONDS)
        history = await fetch_history(client, workflow_id)
        waiting &= {c.scheduled_event_id for c in await unsettled_calls(history, converter)}
    return history


_RUN_CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
}


def _closed(history: WorkflowHistory) -> bool:
    """A run that has ended never hears from a call it left unsettled: waiting would learn nothing."""
    return bool(history.events) and history.events[-1].event_type in _RUN_CLOSED


def may_have_effect(call: ToolCallInput) -> bool:
    """Without the run's schemas (a session's catalog is in the store): a call whose tool is not declared
    safe to repeat (``delivery = "retry"``: no side effect, or idempotent by nature) may have had one."""
    return call.delivery != "retry"


async def answered_calls(history: WorkflowHistory, converter: DataConverter) -> list[EffectRecord]:
    """Every completed ``tools.call`` that may have had an effect, as the calling run's ledger recorded it
    (its own key, so a record of the same call from elsewhere merges with it); a tool's refusal is none."""
    scheduled: dict[int, Payloads] = {}
    records = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == TOOLS_CALL:
                scheduled[event.event_id] = attrs.input
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            payloads = scheduled.pop(done.scheduled_event_id, None)
            if payloads is None:
                continue
            call = (await converter.decode(list(payloads.payloads), [ToolCallInput]))[0]
            answer = (await converter.decode(list(done.result.payloads), [ToolCallResult]))[0]
            unknown = answer.error_type == OUTCOME_UNKNOWN
            if may_have_effect(call) and (unknown or not answer.is_error):
                records.append(
                    EffectRecord(
                        key=call.idempotency_key,
                        tool=call.name,
                        arguments=cap(canonical_arguments(call.arguments)),
                        content=cap(answer.content),
                        outcome="unknown" if unknown else "done",
                    )
                )
    return records


async def running_effects(
    client: Client, workflow_id: str, *, converter: DataConverter, wait: float
) -> list[EffectRecord]:
    """What the current run of ``workflow_id`` (a session's, whose turn may be running) did and may be doing:
    its answered calls, after its unsettled ones settled or ``wait`` passed; those still unsettled, unknown."""
    history = await fetch_history(client, workflow_id)
    pending = [c for c in await unsettled_calls(history, converter) if may_have_effect(c.call)]
    if pending:
        history = await wait_to_settle(client, workflow_id, history, pending, converter=converter, wait=wait)
    still = [c for c in await unsettled_calls(history, converter) if may_have_effect(c.call)]
    return [*await answered_calls(history, converter), *unknown_effects(still, workflow_id)]


def unknown_effects(calls: list[UnsettledCall], source: str) -> list[EffectRecord]:
    """The source's unsettled calls as its fork records them: outcome unknown, under the source's key."""
    return [
        EffectRecord(
            key=c.call.idempotency_key,
            tool=c.call.name,
            arguments=cap(canonical_arguments(c.call.arguments)),
            content=(
                f"{OUTCOME_UNKNOWN}: the call to {c.call.name} may or may not have happened: run {source} was "
                "still making it when this fork started, and its outcome was not recorded. It is not sent again "
                "from this fork; check its effect before calling it with other arguments."
            ),
            outcome="unknown",
        )
        for c in calls
    ]


__all__ = [
    "UnsettledCall",
    "answered_calls",
    "may_have_effect",
    "running_effects",
    "unknown_effects",
    "unsettled_calls",
    "wait_to_settle",
    "with_side_effects",
]
