"""The monitor's nudges: the nudge contract, its prompts, the fallback template, and the per-issue plan.

Pure helpers beside ``MonitorWorkflow``. Every nudge comment ends with a marker
line (``comment_body``) that the scan program counts, and every tracker write
carries a key (``nudge_key`` / ``escalate_key``) that makes a retried,
replayed or repeated write a no-op on the tracker's side.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any, Literal

from ...contracts.monitor import MonitorSpec, StalledIssue
from ...contracts.persisted_ids import escalate_key, nudge_key
from ...contracts.violations import Violation, ViolationKind

NUDGE_CONTRACT = "monitor.nudge"
NUDGE_MARKER = "agentsteps-monitor:nudge"
"""Every nudge comment ends with ``<!-- agentsteps-monitor:nudge YYYY-MM-DD -->``.

Only comments by the monitor's own author that carry it are counted, so a
human quoting the marker cannot change the count."""


def marker_line(day: date) -> str:
    return f"<!-- {NUDGE_MARKER} {day.isoformat()} -->"


Action = Literal["nudge", "escalate", "nudged_today", "already_escalated"]


def plan_action(issue: StalledIssue, spec: MonitorSpec, today: date) -> Action:
    if spec.escalation_label in issue.labels:
        return "already_escalated"
    if issue.last_nudge == today.isoformat():
        return "nudged_today"
    if issue.nudges >= spec.escalate_after_nudges:
        return "escalate"
    return "nudge"


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


def _post(path: str, message: str) -> Violation:
    return Violation(
        contract=NUDGE_CONTRACT, phase="post", kind=ViolationKind.predicate_failed, path=path, message=message
    )


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


__all__ = [
    "NUDGE_CONTRACT",
    "NUDGE_MARKER",
    "NUDGE_SYSTEM_PROMPT",
    "Action",
    "check_nudge",
    "comment_body",
    "escalate_key",
    "marker_line",
    "nudge_key",
    "nudge_prompt",
    "nudge_schema",
    "plan_action",
    "template_nudge",
]
