"""The deploy gate: replay recorded runs against this build's workflows before it serves them.

Histories come from a server (recent runs by workflow type or a visibility
query) or from a folder of ``history.to_json()`` files (``tests/histories/``).
Each replays with Temporal's ``Replayer`` under the worker's own workflows,
sandbox and data converter, so what passes here is what a deployed worker of
this build would accept. A non-determinism is located by replaying ever longer
prefixes of the history: the first workflow task whose recorded commands the
build no longer issues names the event, and that is where a
``workflow.patched`` gate is missing.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from ..contracts.errors import HistoryUnavailableError, InvalidSpecError
from ..contracts.llm.tokens import encoding as warm_tokenizer
from ..contracts.names import WORKFLOWS
from ..contracts.violations import Violation, ViolationKind

# The events a workflow task's commands become: a build that issues other commands mismatches one of these.
_COMMAND_EVENTS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity_task_scheduled_event_attributes",
    EventType.EVENT_TYPE_TIMER_STARTED: "timer_started_event_attributes",
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED: (
        "start_child_workflow_execution_initiated_event_attributes"
    ),
    EventType.EVENT_TYPE_MARKER_RECORDED: "marker_recorded_event_attributes",
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED: (
        "signal_external_workflow_execution_initiated_event_attributes"
    ),
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: "upsert_workflow_search_attributes_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED: "workflow_properties_modified_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED: "activity_task_cancel_requested_event_attributes",
    EventType.EVENT_TYPE_TIMER_CANCELED: "timer_canceled_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "workflow_execution_completed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "workflow_execution_failed_event_attributes",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "workflow_execution_continued_as_new_event_attributes",
}


@dataclass(frozen=True)
class ReplayFinding:
    """One history's verdict; for a failure, where it diverged and what to do about it."""

    workflow_id: str
    workflow_type: str
    source: str
    ok: bool
    events: int
    error: str | None = None
    event_id: int | None = None
    event: str | None = None
    hint: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def workflow_type(history: WorkflowHistory) -> str:
    return history.events[0].workflow_execution_started_event_attributes.workflow_type.name


def describe_event(event: HistoryEvent) -> str:
    """``ActivityTaskScheduled llm.call`` and the like: the event as an engineer reads it."""
    name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").title().replace("_", "")
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        return f"{name} {event.activity_task_scheduled_event_attributes.activity_type.name}"
    if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
        attrs = event.marker_recorded_event_attributes
        patch = attrs.details.get("patch_data")
        suffix = ""
        if patch is not None and patch.payloads:
            try:
                suffix = " " + json.loads(patch.payloads[0].data).get("id", "")
            except ValueError:
                pass
        return f"{name} {attrs.marker_name}{suffix}".rstrip()
    if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
        return f"{name} {event.timer_started_event_attributes.start_to_fire_timeout.ToSeconds()}s"
    if event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        return f"{name} {event.start_child_workflow_execution_initiated_event_attributes.workflow_type.name}"
    return name


def _prefix(history: WorkflowHistory, end: int) -> WorkflowHistory:
    return WorkflowHistory(history.workflow_id, list(history.events[:end]))


def _task_ends(history: WorkflowHistory) -> list[int]:
    """Cut points after each completed workflow task's commands: just before the next task is scheduled."""
    events = history.events
    # A prefix with no completed task gives the Replayer nothing to check (it would wait for one).
    first_done = next(
        (i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED), len(events)
    )
    cuts = [
        i
        for i, e in enumerate(events)
        if i > first_done and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
    ]
    return [*cuts, len(events)]


async def _fails(replayer: Replayer, history: WorkflowHistory) -> BaseException | None:
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


def _quoted(error: str) -> list[str]:
    return re.findall(r"'([^']+)'", error)


async def _locate(replayer: Replayer, history: WorkflowHistory, error: str) -> HistoryEvent | None:
    """The recorded command event the build disagrees with: the first task whose commands no longer replay."""
    named_id = re.search(r"HistoryEvent\(id: (\d+)", error)
    if named_id:
        found = next((e for e in history.events if e.event_id == int(named_id.group(1))), None)
        if found is not None:
            return found
    ends = _task_ends(history)
    lo, hi = 0, len(ends) - 1  # ends[hi] is the whole history, which fails
    while lo < hi:
        mid = (lo + hi) // 2
        if await _fails(replayer, _prefix(history, ends[mid])):
            hi = mid
        else:
            lo = mid + 1
    end = ends[lo]
    start = max(
        (i for i in range(end) if history.events[i].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
        default=0,
    )
    candidates = [e for e in history.events[start:end] if e.event_type in _COMMAND_EVENTS]
    named = set(_quoted(error))
    for event in candidates:
        if named & set(describe_event(event).split()[1:]):
            return event
    return candidates[0] if candidates else (history.events[end - 1] if end else None)


def _hint(wf_type: str, event: HistoryEvent | None) -> str:
    where = f"at event {event.event_id} ({describe_event(event)})" if event is not None else "in this history"
    return (
        f"this build issues different commands from the recorded {wf_type} run {where}: the change that "
        "added, removed or reordered an activity, timer, child workflow or marker there is likely missing a "
        "workflow.patched(<id>) gate (docs/upgrades.md). Keep the old branch for runs already in flight."
    )


@functools.cache
def _replay_runtime() -> Runtime:
    """The Replayer's runtime: the core's warnings ("Failing workflow task ... Nondeterminism", exactly when
    the gate fires) go to Python logging (stderr, one line each), not in colour to stdout under the report."""
    forwarded = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter="WARN", forwarding=forwarded)))


async def check_histories(
    histories: Iterable[tuple[str, WorkflowHistory]] | AsyncIterator[tuple[str, WorkflowHistory]],
    *,
    workflows: Sequence[type],
    data_converter: DataConverter,
    workflow_runner: Any = None,
) -> list[ReplayFinding]:
    """Replay each ``(source, history)`` against ``workflows``; a finding per history, failures located."""
    options: dict[str, Any] = {"workflows": list(workflows), "data_converter": data_converter}
    if workflow_runner is not None:
        options["workflow_runner"] = workflow_runner
    await asyncio.to_thread(warm_tokenizer)  # a run under a quota plan counts its prompts in the workflow
    replayer = Replayer(**options, runtime=_replay_runtime())
    findings: list[ReplayFinding] = []

    async def each() -> AsyncIterator[tuple[str, WorkflowHistory]]:
        if hasattr(histories, "__aiter__"):
            async for item in histories:
                yield item
        else:
            for item in histories:
                yield item

    async for source, history in each():
        wf_type = workflow_type(history)
        failure = await _fails(replayer, history)
        if failure is None:
            findings.append(ReplayFinding(history.workflow_id, wf_type, source, True, len(history.events)))
            continue
        error = str(failure)
        match = re.search(r'message: "([^"]+)"', error)
        error = match.group(1) if match else error
        event = await _locate(replayer, history, error)
        findings.append(
            ReplayFinding(
                history.workflow_id,
                wf_type,
                source,
                False,
                len(history.events),
                error=error,
                event_id=event.event_id if event is not None else None,
                event=describe_event(event) if event is not None else None,
                hint=_hint(wf_type, event),
            )
        )
    return findings


def _bad(path: str, message: str) -> InvalidSpecError:
    return InvalidSpecError(
        [Violation(contract="replay", phase="pre", kind=ViolationKind.invalid_config, path=path, message=message)]
    )


def history_files(folder: str | Path) -> list[tuple[str, WorkflowHistory]]:
    """Every ``*.json`` history in ``folder``; a file that is not one is a typed error naming it."""
    root = Path(folder)
    if not root.is_dir():
        raise _bad("--histories", f"{folder}: not a directory of history files")
    loaded = []
    for path in sorted(root.glob("*.json")):
        try:
            history = WorkflowHistory.from_json(path.stem, path.read_text())
            if not history.events or not history.events[0].HasField("workflow_execution_started_event_attributes"):
                raise ValueError("its first event is not WorkflowExecutionStarted")
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user error
            raise _bad(str(path), f"{path.name} is not a Temporal history (history.to_json()): {exc}") from None
        loaded.append((str(path), history))
    if not loaded:
        raise _bad("--histories", f"{folder}: no *.json history files")
    return loaded


def visibility_query(workflow_type: str | None, query: str | None) -> str:
    """The list filter: a raw visibility query wins; a workflow type must be one of this build's."""
    if query:
        return query
    if workflow_type:
        if workflow_type not in WORKFLOWS:
            raise _bad("--type", f"unknown workflow type {workflow_type!r}; known: {', '.join(sorted(WORKFLOWS))}")
        return f'WorkflowType="{workflow_type}"'
    return ""


async def fetch_history(
    client: Client, workflow_id: str, run_id: str | None = None, *, next_step: str | None = None
) -> WorkflowHistory:
    """A run's full history, or ``HistoryUnavailableError`` when the server no longer keeps it (its message
    ends with ``next_step``, what the caller can do instead: replay's ``--histories DIR`` by default)."""
    hint = {} if next_step is None else {"next_step": next_step}
    try:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    except RPCError as exc:
        if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
            raise HistoryUnavailableError(workflow_id, exc.message, **hint) from None
        raise
    if not history.events:
        raise HistoryUnavailableError(workflow_id, **hint)
    return history


async def server_histories(client: Client, query: str, limit: int) -> AsyncIterator[tuple[str, WorkflowHistory]]:
    """The ``limit`` most recent runs matching ``query``, newest first, each with its full history."""
    async for execution in client.list_workflows(query or None, limit=limit):
        history = await fetch_history(client, execution.id, execution.run_id)
        yield f"{execution.id}/{execution.run_id}", history


def render(findings: list[ReplayFinding]) -> str:
    width = max([len("WORKFLOW"), *(len(f.workflow_id) for f in findings)])
    type_width = max([len("TYPE"), *(len(f.workflow_type) for f in findings)])
    lines = [f"{'WORKFLOW':<{width}}  {'TYPE':<{type_width}}  EVENTS  RESULT"]
    for f in findings:
        verdict = "ok" if f.ok else f"NON-DETERMINISTIC at event {f.event_id}: {f.event}"
        lines.append(f"{f.workflow_id:<{width}}  {f.workflow_type:<{type_width}}  {f.events:>6}  {verdict}")
        if not f.ok:
            lines.append(f"    {f.error}")
            lines.append(f"    {f.hint}")
    failed = sum(not f.ok for f in findings)
    lines.append(
        f"{len(findings)} histories replayed: "
        + ("all replay on this build" if not failed else f"{failed} do not replay; do not deploy this build")
    )
    return "\n".join(lines)


def report_json(findings: list[ReplayFinding]) -> dict[str, Any]:
    """The ``--json`` body; the CLI names its shape (``cli/json_output.REPLAY_CHECK``)."""
    return {
        "ok": all(f.ok for f in findings),
        "replayed": len(findings),
        "failed": sum(not f.ok for f in findings),
        "histories": [f.as_json() for f in findings],
    }
