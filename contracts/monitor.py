"""The stalled-ticket monitor's pure types: spec, report, the nudge contract and the scan program.

One monitor tick (``StalledTicketMonitor``):

1. a fixed, reviewed code-mode program (``SCAN_PROGRAM``) lists the stalled
   issues through the tracker's tools and counts earlier nudges by their marker;
2. ``plan_action`` decides per issue: nudge, escalate, or leave alone;
3. each nudge is drafted by the LLM under the nudge contract (``nudge_schema``
   plus ``check_nudge``) and posted with the key ``nudge:<issue>:<date>``;
4. each escalation adds a label and reassigns to the lead, key ``escalate:<issue>``.

"At most one nudge per issue per day" and "never a duplicate comment, whatever
crashes" hold by construction: the tracker's idempotency keys make a retried or
replayed write a no-op, and the marker (with its date) lets a later tick see
what earlier ticks did, on the tracker's side, without a ledger of our own.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .code.program import ProgramLimits
from .llm.request import LLMConfig, Usage
from .llm.violations import Violation, ViolationKind
from .spec import ActivityPolicy

MONITOR_WORKFLOW = "StalledTicketMonitor"
RECORD_ACTIVITY = "monitor.record"
NUDGE_CONTRACT = "monitor.nudge"
NUDGE_MARKER = "agentsteps-monitor:nudge"
"""Every nudge comment ends with ``<!-- agentsteps-monitor:nudge YYYY-MM-DD -->``.

Only comments by the monitor's own author that carry it are counted, so a
human quoting the marker cannot change the count."""

IssueState = Literal["open", "in_progress", "closed"]


def nudge_key(issue_id: str, day: date) -> str:
    return f"nudge:{issue_id}:{day.isoformat()}"


def escalate_key(issue_id: str) -> str:
    return f"escalate:{issue_id}"


def marker_line(day: date) -> str:
    return f"<!-- {NUDGE_MARKER} {day.isoformat()} -->"


class TrackerTools(BaseModel):
    """The tracker's tools by the names the worker's catalog gives them (``tool_prefix`` included)."""

    model_config = ConfigDict(extra="forbid")

    list_issues: str = "list_issues"
    get_issue: str = "get_issue"
    add_comment: str = "add_comment"
    update_issue: str = "update_issue"


class MonitorSpec(BaseModel):
    """What one monitor watches and how it acts. Schedules carry it in their file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="stalled-tickets", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """Metric label and report name."""
    project: str | None = None
    """Tracker project key; None watches every project."""
    states: list[IssueState] = Field(default_factory=lambda: ["open", "in_progress"], min_length=1)
    """"Open" means not closed: an issue stuck in progress is the typical stall."""
    stalled_after_days: int = Field(default=7, ge=1, le=365)
    escalate_after_nudges: int = Field(default=2, ge=1, le=50)
    lead: str = Field(min_length=1)
    """Escalations are reassigned to this user."""
    escalation_label: str = Field(default="escalated", min_length=1)
    author: str = Field(default="agentsteps-monitor", min_length=1)
    """Author of nudge comments; only this author's marked comments count as nudges."""
    max_nudges_per_day: int = Field(default=1, ge=1, le=1)
    """Fixed at 1: the nudge key holds the date, so a second nudge the same day cannot be written."""
    max_actions_per_tick: int = Field(default=50, ge=1, le=1000)
    """Nudges plus escalations per tick, most stale first; the rest are reported as deferred."""
    message_max_chars: int = Field(default=600, ge=40, le=4000)
    model: LLMConfig
    fallback_models: list[LLMConfig] = Field(default_factory=list)
    reprompt_budget: int = Field(default=2, ge=0, le=10)
    template_fallback: bool = True
    """When the models cannot draft a valid nudge, post a fixed template instead of skipping the issue."""
    draft_concurrency: int = Field(default=8, ge=1, le=64)
    token_budget: int = Field(default=200_000, ge=1)
    """Per tick; once spent, the remaining nudges are deferred to the next tick."""
    page_size: int = Field(default=50, ge=1, le=200)
    """Issues per ``list_issues`` page; pages carry full bodies, so keep them well under 2 MB."""
    tools: TrackerTools = Field(default_factory=TrackerTools)
    llm_policy: ActivityPolicy = Field(default_factory=ActivityPolicy)
    tool_policy: ActivityPolicy = Field(default_factory=lambda: ActivityPolicy(start_to_close_seconds=60.0))
    program_limits: ProgramLimits = Field(default_factory=lambda: ProgramLimits(total_seconds=120.0, max_tool_calls=2000))


class MonitorInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: MonitorSpec
    as_of: datetime | None = None
    """The tick's "now"; None (what schedules send) means ``workflow.now()``. Tests and backfills set it."""


class StalledIssue(BaseModel):
    """One row of the scan program's value."""

    id: str
    assignee: str
    title: str = ""
    updated_at: str
    labels: list[str] = Field(default_factory=list)
    nudges: int = 0
    """Earlier nudge comments by the monitor (marker count)."""
    last_nudge: str | None = None
    """Date (YYYY-MM-DD) of the latest nudge marker."""
    inspected: bool = False
    """Comments were read; only the most stale ``max_actions_per_tick`` issues are inspected."""


class ScanResult(BaseModel):
    """The scan program's value: every stalled id, and details for the ones to act on."""

    stalled: list[str]
    candidates: list[StalledIssue]


Action = Literal["nudge", "escalate", "nudged_today", "already_escalated"]


def plan_action(issue: StalledIssue, spec: MonitorSpec, today: date) -> Action:
    if spec.escalation_label in issue.labels:
        return "already_escalated"
    if issue.last_nudge == today.isoformat():
        return "nudged_today"
    if issue.nudges >= spec.escalate_after_nudges:
        return "escalate"
    return "nudge"


class IssueFailure(BaseModel):
    issue_id: str
    reason: str


class MonitorReport(BaseModel):
    monitor: str
    as_of: datetime
    day: str
    stalled_ids: list[str] = Field(default_factory=list)
    nudged: list[str] = Field(default_factory=list)
    escalated: list[str] = Field(default_factory=list)
    nudged_today: list[str] = Field(default_factory=list)
    """Stalled, but already nudged on this date (by an earlier tick)."""
    already_escalated: list[str] = Field(default_factory=list)
    deferred: list[str] = Field(default_factory=list)
    """Over the per-tick action cap or token budget; handled by a later tick."""
    template_nudges: list[str] = Field(default_factory=list)
    """Nudged with the fixed template after the models failed the contract."""
    failed: list[IssueFailure] = Field(default_factory=list)
    scan_tool_calls: int = 0
    """Tracker calls the scan program made; their results stayed in the sandbox, never in a prompt."""
    reprompts: int = 0
    violations: list[Violation] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[str, int]:
        return {
            "stalled": len(self.stalled_ids),
            "nudged": len(self.nudged),
            "escalated": len(self.escalated),
            "nudged_today": len(self.nudged_today),
            "already_escalated": len(self.already_escalated),
            "deferred": len(self.deferred),
            "failed": len(self.failed),
        }


class MonitorMetrics(BaseModel):
    """Input of ``monitor.record``: what the metrics need from a report, nothing more."""

    monitor: str
    run_id: str
    stalled: int
    nudged: int
    escalated: int


# ---------------------------------------------------------------- the nudge contract


def nudge_schema(max_chars: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "issue_id": {"type": "string", "minLength": 1},
            "message": {"type": "string", "minLength": 1, "maxLength": max_chars},
        },
        "required": ["issue_id", "message"],
        "additionalProperties": False,
    }


class NudgeDraft(BaseModel):
    issue_id: str
    message: str


def _post(path: str, message: str) -> Violation:
    return Violation(contract=NUDGE_CONTRACT, phase="post", kind=ViolationKind.predicate_failed, path=path, message=message)


def check_nudge(value: Any, issue: StalledIssue) -> list[Violation]:
    """The predicates a schema cannot state; the schema (ids, length) is checked by ``llm.call``."""
    if not isinstance(value, dict):
        return [_post("$.content", "the answer must be a JSON object with issue_id and message")]
    out = []
    if value.get("issue_id") != issue.id:
        out.append(_post("$.content.issue_id", f"issue_id must be {issue.id!r}, got {value.get('issue_id')!r}"))
    message = value.get("message")
    if isinstance(message, str):
        if not re.search(rf"(?<![\w.-]){re.escape(issue.assignee)}(?![\w-])", message, re.IGNORECASE):
            out.append(_post("$.content.message", f"the message must name the assignee, {issue.assignee!r}"))
        if NUDGE_MARKER in message:
            out.append(_post("$.content.message", "the message must not contain the monitor's marker text"))
    return out


NUDGE_SYSTEM_PROMPT = """\
You write short, friendly nudges on stalled tickets in an issue tracker.
Address the assignee by their user name (for example "@alice"), say the issue
has had no activity for a while, and ask for an update or a hand-over.
Answer with one JSON object and nothing else:
{{"issue_id": "<the issue id>", "message": "<the nudge, at most {max_chars} characters>"}}"""


def nudge_prompt(issue: StalledIssue, today: date, stalled_days: int) -> str:
    # Only the title enters the prompt: bodies are long and are text anyone can write.
    return (
        f'Draft a nudge for issue_id "{issue.id}".\n'
        f'assignee: "{issue.assignee}"\n'
        f'title: "{issue.title[:200]}"\n'
        f"last updated: {issue.updated_at} (at least {stalled_days} days before {today.isoformat()})\n"
        f"earlier nudges: {issue.nudges}"
    )


def template_nudge(issue: StalledIssue, stalled_days: int, max_chars: int) -> str:
    text = (
        f"@{issue.assignee}, {issue.id} has had no activity for over {stalled_days} days. "
        "Could you post an update, or hand it over if you are blocked?"
    )
    return text[:max_chars]


def comment_body(message: str, day: date) -> str:
    return f"{message}\n\n{marker_line(day)}"


# ---------------------------------------------------------------- the scan program

SCAN_PROGRAM = '''\
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
'''
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


__all__ = [
    "MONITOR_WORKFLOW",
    "NUDGE_CONTRACT",
    "NUDGE_MARKER",
    "RECORD_ACTIVITY",
    "IssueFailure",
    "MonitorInput",
    "MonitorMetrics",
    "MonitorReport",
    "MonitorSpec",
    "NudgeDraft",
    "ScanResult",
    "StalledIssue",
    "TrackerTools",
    "check_nudge",
    "escalate_key",
    "nudge_key",
    "nudge_schema",
    "plan_action",
    "scan_program",
]
