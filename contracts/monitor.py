"""The stalled-ticket monitor's types: its spec, input, scan result, report and metrics input.

Types only. The monitor's behaviour lives beside ``MonitorWorkflow`` in
``workflows/monitor/``: the scan program (``scan.py``), and the nudge
contract, prompts, keys and per-issue plan (``nudges.py``); ``docs/monitor.md``
tells the whole tick.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .code.program import ProgramLimits
from .llm.request import LLMConfig, Usage
from .spec import ActivityPolicy
from .violations import Violation

IssueState = Literal["open", "in_progress", "closed"]


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
    states: list[IssueState] = Field(default_factory=lambda: list[IssueState](["open", "in_progress"]), min_length=1)
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
    program_limits: ProgramLimits = Field(
        default_factory=lambda: ProgramLimits(total_seconds=120.0, max_tool_calls=2000)
    )


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
    metrics_error: str | None = None
    """Why ``monitor.record`` could not record this tick's metrics (retried, then given up: the tick's work stands)."""
    violations: list[Violation] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses any decorator over @property; pydantic's own
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


__all__ = [
    "IssueFailure",
    "IssueState",
    "MonitorInput",
    "MonitorMetrics",
    "MonitorReport",
    "MonitorSpec",
    "ScanResult",
    "StalledIssue",
    "TrackerTools",
]
