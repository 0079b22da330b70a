"""Temporal Schedules defined in files: apply, list, pause, resume, trigger.

The command line over this is ``cli/schedule.py`` (``agentsteps schedule``).

``apply_schedules`` reads ``deploy/schedules/*.toml`` (see
``contracts/config/schedules.py`` for the format) and creates or updates each
schedule. It is idempotent: the digest of what a file says is kept in the
schedule action's memo, so an unchanged file is left alone, and a changed one
is updated in place. A schedule's paused state belongs to operators: ``apply``
sets it only when it creates the schedule.

Removing a file does not delete its schedule (``temporal schedule delete``
does); deleting production schedules should never be a side effect.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from ..contracts.config.schedules import ScheduleChange, ScheduleFile, ScheduleStatus, parse_schedule_file
from ..contracts.errors import ScheduleFileError, ScheduleNotFoundError

DEFAULT_DIRECTORY = Path("deploy/schedules")
DIGEST_MEMO = "agentsteps.schedule_digest"

_OVERLAP = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}


def load_schedule_files(directory: str | Path = DEFAULT_DIRECTORY) -> list[ScheduleFile]:
    """Every ``*.toml`` in ``directory``, parsed and validated; ``ScheduleFileError`` names file and field."""
    root = Path(directory)
    if not root.is_dir():
        raise ScheduleFileError(str(root), "$", "schedule directory does not exist")
    files: list[ScheduleFile] = []
    seen: dict[str, Path] = {}
    for path in sorted(root.glob("*.toml")):
        parsed = parse_schedule_file(path.read_text(encoding="utf-8"), name=path.stem, origin=str(path))
        if parsed.id in seen:
            raise ScheduleFileError(str(path), "id", f"schedule id {parsed.id!r} is also used by {seen[parsed.id]}")
        seen[parsed.id] = path
        files.append(parsed)
    return files


def build_schedule(file: ScheduleFile, *, state: ScheduleState | None = None) -> Schedule:
    spec = ScheduleSpec(
        intervals=[ScheduleIntervalSpec(every=file.every, offset=file.offset)] if file.every else [],
        cron_expressions=[file.cron] if file.cron else [],
        jitter=file.jitter,
        time_zone_name=file.time_zone,
    )
    action = ScheduleActionStartWorkflow(
        file.workflow,
        # Plain JSON, so the schedule works with any data converter; defaults are frozen at apply time.
        file.workflow_input().model_dump(mode="json"),
        id=file.id,
        task_queue=file.task_queue,
        execution_timeout=file.execution_timeout,
        memo={DIGEST_MEMO: file.digest()},
    )
    policy = SchedulePolicy(overlap=_OVERLAP[file.overlap], catchup_window=file.catchup_window)
    return Schedule(
        action=action,
        spec=spec,
        policy=policy,
        state=state or ScheduleState(paused=file.paused, note=file.note or None),
    )


def _digest_of(description: ScheduleDescription) -> str | None:
    action = description.schedule.action
    memo = getattr(action, "memo", None) or {}
    payload = memo.get(DIGEST_MEMO)
    if payload is None:
        return None
    if isinstance(payload, str):
        return payload
    digest: str | None = description.data_converter.payload_converter.from_payloads([payload])[0]
    return digest


async def _describe(handle: ScheduleHandle) -> ScheduleDescription | None:
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def apply_schedule(client: Client, file: ScheduleFile) -> Literal["created", "updated", "unchanged"]:
    """Create or update one schedule; returns ``created``, ``updated`` or ``unchanged``."""
    handle = client.get_schedule_handle(file.id)
    current = await _describe(handle)
    if current is None:
        await client.create_schedule(file.id, build_schedule(file))
        return "created"
    if _digest_of(current) == file.digest():
        return "unchanged"

    def update(inp: ScheduleUpdateInput) -> ScheduleUpdate:
        # Keep whatever operators did to the state (pause, resume, note).
        return ScheduleUpdate(schedule=build_schedule(file, state=inp.description.schedule.state))

    await handle.update(update)
    return "updated"


async def apply_schedules(client: Client, directory: str | Path = DEFAULT_DIRECTORY) -> list[ScheduleChange]:
    """Apply every file in ``directory``; one change per schedule.

    All files are validated before anything is applied, so one bad file
    changes nothing.
    """
    files = load_schedule_files(directory)
    return [ScheduleChange(id=file.id, outcome=await apply_schedule(client, file)) for file in files]


async def list_schedules(client: Client) -> list[ScheduleStatus]:
    """Every schedule in the namespace (visibility is eventually consistent: a new one can lag a second)."""
    out = []
    async for entry in await client.list_schedules():
        described = await _describe(client.get_schedule_handle(entry.id))
        if described is None:
            continue
        action = described.schedule.action
        recent = described.info.recent_actions
        out.append(
            ScheduleStatus(
                id=entry.id,
                workflow=getattr(action, "workflow", type(action).__name__),
                paused=described.schedule.state.paused,
                note=described.schedule.state.note or "",
                managed=_digest_of(described) is not None,
                next_run=described.info.next_action_times[0] if described.info.next_action_times else None,
                last_run=recent[-1].started_at if recent else None,
            )
        )
    return sorted(out, key=lambda s: s.id)


async def _existing(client: Client, schedule_id: str) -> ScheduleHandle:
    handle = client.get_schedule_handle(schedule_id)
    if await _describe(handle) is None:
        raise ScheduleNotFoundError(schedule_id)
    return handle


async def pause(client: Client, schedule_id: str, note: str | None = None) -> None:
    await (await _existing(client, schedule_id)).pause(note=note or "paused with agentsteps schedule pause")


async def resume(client: Client, schedule_id: str, note: str | None = None) -> None:
    await (await _existing(client, schedule_id)).unpause(note=note or "resumed with agentsteps schedule resume")


async def trigger(client: Client, schedule_id: str, *, within: float = 10.0) -> str | None:
    """Run one tick now, under the schedule's own overlap policy; returns the id of the workflow it started,
    or None when the policy skipped it (a tick was still running) or no start was seen within ``within`` s."""
    handle = await _existing(client, schedule_id)
    before = _started(await handle.describe())
    await handle.trigger()
    deadline = asyncio.get_running_loop().time() + within
    while True:
        new = _started(await handle.describe()) - before
        if new:
            return sorted(new)[0]
        if asyncio.get_running_loop().time() >= deadline:
            return None
        await asyncio.sleep(0.2)


def _started(description: ScheduleDescription) -> set[str]:
    info = description.info
    actions = [r.action for r in info.recent_actions] + list(info.running_actions)
    return {a.workflow_id for a in actions if isinstance(a, ScheduleActionExecutionStartWorkflow)}


__all__ = [
    "apply_schedule",
    "apply_schedules",
    "build_schedule",
    "list_schedules",
    "load_schedule_files",
    "pause",
    "resume",
    "trigger",
]
