"""``agentsteps schedule apply|list|pause|resume|trigger``: the shell over ``client/schedules.py``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from ..client.schedules import (
    DEFAULT_DIRECTORY,
    apply_schedules,
    list_schedules,
    load_schedule_files,
    pause,
    resume,
    trigger,
)
from ..contracts.config.schedules import ScheduleChange
from .json_output import SCHEDULE_CHANGES, SCHEDULE_LIST, print_json

if TYPE_CHECKING:
    from temporalio.client import Client


def schedule_command(args: argparse.Namespace) -> int:
    """``agentsteps schedule ACTION [NAME]``; returns the exit status (2 for bad usage)."""
    action = args.action
    name = getattr(args, "name", None)
    if action in ("pause", "resume", "trigger") and not name:
        print(f"error: 'agentsteps schedule {action}' needs a schedule name", file=sys.stderr)
        return 2
    if action == "apply":
        load_schedule_files(getattr(args, "dir", DEFAULT_DIRECTORY))  # bad files fail before connecting
    try:
        return asyncio.run(_run(args, action, name))
    except RuntimeError as exc:
        if "connect" not in str(exc).lower():
            raise
        print(
            f"error: cannot reach Temporal ({exc}); start it with 'agentsteps dev' or set TEMPORAL_ADDRESS",
            file=sys.stderr,
        )
        return 1


async def _run(args: argparse.Namespace, action: str, name: str | None) -> int:
    from ..client.connection import connect
    from ..client.settings import load_settings

    client = await connect(load_settings(getattr(args, "config", None)))
    note = getattr(args, "note", None)
    as_json = getattr(args, "json", False)
    if action == "list":
        rows = await list_schedules(client)
        if as_json:
            print_json(SCHEDULE_LIST, {"schedules": [r.model_dump(mode="json") for r in rows]})
            return 0
        for row in rows:
            state = "paused" if row.paused else "active"
            nxt = row.next_run.isoformat() if row.next_run and not row.paused else "-"
            print(f"{row.id:<28} {row.workflow:<24} {state:<7} next {nxt}" + (f"  ({row.note})" if row.note else ""))
        return 0
    if action == "apply":
        changes = await apply_schedules(client, getattr(args, "dir", DEFAULT_DIRECTORY))
    elif action == "pause":
        await pause(client, name or "", note)
        changes = [ScheduleChange(id=name or "", outcome="paused")]
    elif action == "resume":
        await resume(client, name or "", note)
        changes = [ScheduleChange(id=name or "", outcome="resumed")]
    else:
        started = await trigger(client, name or "")
        changes = [ScheduleChange(id=name or "", outcome="triggered" if started else "skipped", workflow_id=started)]
    wait = action == "trigger" and getattr(args, "wait", False)
    if as_json and not wait:
        print_json(SCHEDULE_CHANGES, {"changes": [c.model_dump(mode="json", exclude_none=True) for c in changes]})
        return 0
    for change in changes:
        if change.outcome == "triggered" and change.workflow_id:
            print(f"triggered {change.id}: workflow {change.workflow_id}", file=sys.stderr if as_json else sys.stdout)
        elif change.outcome == "skipped":
            print(
                f"skipped {change.id}: no tick started (a tick is still running, and overlap = skip)", file=sys.stderr
            )
        else:
            print(f"{change.outcome} {change.id}")
    if wait:
        if not changes[0].workflow_id:
            return 1
        return await _wait_for(client, changes, as_json)
    return 0


async def _wait_for(client: Client, changes: list[ScheduleChange], as_json: bool) -> int:
    """The tick's result: the monitor's report as ``agentsteps demo`` prints it, or with ``--json`` the
    changes plus the tick's ``result``."""
    from temporalio.client import WorkflowFailureError

    from ..contracts.monitor import MonitorReport
    from ..contracts.names import MONITOR_WORKFLOW
    from ..demos.monitor import print_report
    from .failure_lines import describe

    workflow_id = changes[0].workflow_id or ""
    handle = client.get_workflow_handle(workflow_id)
    kind = (await handle.describe()).workflow_type
    print(f"waiting for {workflow_id} ({kind}) to finish ...", file=sys.stderr, flush=True)
    try:
        if kind == MONITOR_WORKFLOW:
            report = await client.get_workflow_handle(workflow_id, result_type=MonitorReport).result()
            result, failed = report.model_dump(mode="json"), report.failed
            if not as_json:
                print_report(report, sys.stdout)
        else:
            result, failed = await handle.result(), False
            if not as_json:
                print(json.dumps(result, indent=2, default=str))
    except WorkflowFailureError as exc:
        print(f"tick failed: {describe(exc)}", file=sys.stderr)
        return 1
    if as_json:
        print_json(
            SCHEDULE_CHANGES,
            {
                "changes": [c.model_dump(mode="json", exclude_none=True) for c in changes],
                "result": json.loads(json.dumps(result, default=str)),
            },
        )
    return 1 if failed else 0
