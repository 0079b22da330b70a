"""The monitor's scan: a fixed code-mode program and its parameters.

Pure: the text is built here and run by ``MonitorWorkflow`` through the
program driver (``code.start`` / ``code.resume``, each tracker read a
``tools.call``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ...contracts.monitor import MonitorSpec
from .nudges import NUDGE_MARKER

SCAN_PROGRAM = """\
stalled = []
for state in params["states"]:
    cursor = None
    while True:
        page = await list_issues(project=params["project"], state=state, updated_before=params["cutoff"],
                                 limit=params["page_size"], cursor=cursor)
        for issue in page["issues"]:
            if issue["assignee"]:
                stalled.append({"id": issue["id"], "assignee": issue["assignee"], "title": issue["title"],
                                "updated_at": issue["updated_at"], "labels": issue["labels"]})
        cursor = page["next_cursor"]
        if cursor is None:
            break

stalled.sort(key=lambda row: (row["updated_at"], row["id"]))
label = params["escalation_label"]
# Escalated issues are the lead's now: they are stalled, but never acted on again.
actionable = [row for row in stalled if label not in row["labels"]][: params["max_actions"]]
details = await asyncio.gather(*[get_issue(id=row["id"]) for row in actionable])
marker = params["marker"]
for row, detail in zip(actionable, details):
    dates = []
    for comment in detail["comments"]:
        body = comment["body"]
        at = body.find(marker)
        if comment["author"] == params["author"] and at >= 0:
            dates.append(body[at + len(marker):].strip().split(" ")[0])
    row["nudges"] = len(dates)
    row["last_nudge"] = max(dates) if dates else None
    row["inspected"] = True

{"stalled": [row["id"] for row in stalled],
 "candidates": actionable + [row for row in stalled if label in row["labels"]]}
"""
"""Reviewed once, run every tick; never written by a model. Why fixed:

- the stalled set must be exact and reproducible (it is compared to SQL in the tests);
- ticket text is written by anyone, so a model reading it could be steered; this
  program only compares fields, whatever the text says;
- an hourly job should not spend tokens writing the same query each hour.

It still runs as a code-mode program: in Monty, through ``code.start`` /
``code.resume``, each tool call its own ``tools.call`` activity, so the large
pages never reach a prompt. ``params`` is prepended as a Python literal.
"""


def scan_params(spec: MonitorSpec, as_of: datetime) -> dict[str, Any]:
    cutoff = as_of - timedelta(days=spec.stalled_after_days)
    return {
        "project": spec.project,
        "states": list(spec.states),
        "cutoff": cutoff.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "page_size": spec.page_size,
        "escalation_label": spec.escalation_label,
        "max_actions": spec.max_actions_per_tick,
        "marker": NUDGE_MARKER,
        "author": spec.author,
    }


def scan_program(spec: MonitorSpec, as_of: datetime) -> str:
    # repr of str/int/list/None is a valid Python literal, and nothing here comes from ticket text.
    return f"import asyncio\nparams = {scan_params(spec, as_of)!r}\n{SCAN_PROGRAM}"


__all__ = ["SCAN_PROGRAM", "scan_params", "scan_program"]
