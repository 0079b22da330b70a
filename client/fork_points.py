"""Where a recorded run can be forked: what "step N" names, in tool mode and in code mode.

Tool mode: step N is the source's model step N (``len(steps)``: after the last one).

Code mode counts finer, because a program holds state between its calls: the
steps are the model calls and the calls programs made (tools and ``llm()``),
numbered in the order they happened. Model step i is one point, followed by
one point per call its program made while it could still pause (by the
sandbox's call id); the last point is after everything. A point inside a
program carries the program paused as the source's history recorded it: the
results of its ``code.start`` / ``code.resume`` segments (local-activity
markers) and of the ``tools.call`` activities that resumed it, each with the
calls issued so far.

Calls that paused together share one snapshot: forking before the second of
them restores the program where both were pending, and the first is made again
(answered from the source's record when it had an effect).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter

from ..contracts import Step
from ..contracts.code.carried import CarryingCallResult, carried_pause
from ..contracts.code.program import ProgramStatus
from ..contracts.names import CODE_FORK, CODE_RESUME, CODE_START, TOOLS_CALL
from ..contracts.persisted_ids import RUN_SCOPE, program_call_id
from ..contracts.violations import ViolationKind

LOCAL_ACTIVITY_MARKER = "core_local_activity"
"""The Temporal SDK's marker for a completed local activity: ``data`` (its type) and ``result``."""

_NOT_RUN = (ViolationKind.program_syntax, ViolationKind.program_type)


@dataclass(frozen=True)
class ForkPoint:
    """One place a fork can start: before model step ``step``, or inside its program before call ``call_id``."""

    step: int
    call_id: int | None = None
    paused: ProgramStatus | None = None
    """Inside a program: the program as the fork resumes it (its snapshot still the source's)."""

    def describe(self) -> str:
        if self.call_id is None:
            return f"before model step {self.step}"
        call = program_call_id(RUN_SCOPE, self.step, self.call_id)
        return f"inside model step {self.step}'s program, before its call {call}"


async def program_segments(history: WorkflowHistory, converter: DataConverter) -> list[list[ProgramStatus]]:
    """Each program the run started, as its segments' results in order: ``code.start``'s (a fork's first
    program: ``code.fork``'s, the source's program re-bound), then each ``code.resume``'s, or the next
    pause a ``tools.call`` activity answered with (``CarryingCallResult.program``)."""
    programs: list[list[ProgramStatus]] = []
    tool_calls: set[int] = set()
    """Scheduled ``tools.call`` events: a completed one may carry its program's next pause."""
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == TOOLS_CALL:
                tool_calls.add(event.event_id)
            continue
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            if done.scheduled_event_id in tool_calls and programs:
                payloads = list(done.result.payloads)
                result = (await converter.decode(payloads, [CarryingCallResult]))[0] if payloads else None
                following = carried_pause(result) if result is not None else None
                if following is not None:
                    programs[-1].append(following)  # resumed by the call's own activity
            continue
        if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        marker = event.marker_recorded_event_attributes
        if marker.marker_name != LOCAL_ACTIVITY_MARKER or "result" not in marker.details:
            continue  # a patch marker, or a local activity that failed (no result)
        data: Any = (await converter.decode(list(marker.details["data"].payloads), [dict]))[0]
        kind = data.get("activity_type") if isinstance(data, dict) else None
        if kind not in (CODE_START, CODE_FORK, CODE_RESUME):
            continue
        status = (await converter.decode(list(marker.details["result"].payloads), [ProgramStatus]))[0]
        if status.needs_replay:
            continue  # the worker had no live copy and asked for the replay log: the next resume is the segment
        if kind in (CODE_START, CODE_FORK):
            programs.append([status])
        elif programs:
            programs[-1].append(status)
    return programs


def ran_a_program(step: Step) -> bool:
    """The step's program passed its check and ran (completed, failed or broke the output schema)."""
    return step.program is not None and not any(v.kind in _NOT_RUN for v in step.violations)


def _resumable(segments: Sequence[ProgramStatus], index: int) -> ProgramStatus:
    """Segment ``index`` as a fork resumes it: every call issued up to it whose outcome the program has
    not had yet (those it awaits, and any it started earlier and awaits later) still to be made."""
    answered: set[int] = set()
    for earlier in segments[:index]:
        answered.update(earlier.awaiting)
    issued = {c.call_id: c for s in segments[: index + 1] for c in s.calls}
    pending = [issued[i] for i in sorted(issued) if i not in answered]
    update: dict[str, Any] = {"calls": pending}
    start = segments[0].replay
    if start is not None:
        # Kept live in the source: the fork replays the program from its last stored snapshot (or its
        # start) with the outcomes the source's segments were resumed with.
        stored = [i for i in range(index + 1) if segments[i].snapshot is not None]
        fed = [s.fed for s in segments[(stored[-1] if stored else 0) + 1 : index + 1]]
        if stored:
            update["replay"] = start.model_copy(update={"base": segments[stored[-1]].snapshot, "batches": fed})
        else:  # from the start (or, in a fork's own program, from where its source's replay began)
            update["replay"] = start.model_copy(update={"batches": [*start.batches, *fed]})
    return segments[index].model_copy(update=update)


def code_points(steps: Sequence[Step], programs: Sequence[Sequence[ProgramStatus]]) -> list[ForkPoint]:
    """The code-mode timeline: each model step, then its program's calls; last, after everything."""
    points: list[ForkPoint] = []
    remaining = iter(programs)
    for step in steps:
        points.append(ForkPoint(step.index))
        if not ran_a_program(step):
            continue
        segments = next(remaining, None)
        if segments is None:
            raise ValueError(f"the history holds no program for step {step.index}, which ran one")
        recorded = {r.call_id for r in step.tool_calls}
        issued = {program_call_id(RUN_SCOPE, step.index, c.call_id) for s in segments for c in s.calls}
        if not recorded <= issued:
            raise ValueError(f"the program segments in history do not match step {step.index}'s calls")
        for index, segment in enumerate(segments):
            if segment.state != "pending" or (segment.snapshot is None and segments[0].replay is None):
                continue  # calls issued as the program ended cannot be forked inside: nothing is paused
            paused = _resumable(segments, index)
            points += [ForkPoint(step.index, c.call_id, paused) for c in sorted(segment.calls, key=lambda c: c.call_id)]
    points.append(ForkPoint(len(steps)))
    return points


__all__ = ["ForkPoint", "code_points", "program_segments", "ran_a_program"]
