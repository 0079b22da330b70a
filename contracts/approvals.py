"""Human approval of tool calls: what is pending, what a person decides, what was decided.

A tool that requires approval (``@registry.tool(requires_approval=True)``, or
``require_approval`` for an MCP server's tools in the config file) does not
run when the model or a program calls it: the run waits until the
``approve`` or ``reject`` Update names its ``approval_id``, or until the
spec's ``approval_timeout_seconds`` rejects it. A rejection reaches the model
as the tool's error.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .json_schema import json_path

ApprovalOutcome = Literal["approved", "rejected", "timed_out", "withdrawn"]
"""``withdrawn``: the call's turn (or run) failed or was cancelled before anyone decided; it never runs."""


class PendingApproval(BaseModel):
    """One call waiting for a person (the ``approvals`` query and the progress stream)."""

    approval_id: str
    tool: str
    arguments: str
    """The call's arguments as JSON text (as the model or program wrote them)."""
    reason: str
    requested_at: datetime
    expires_at: datetime
    model_text: str = ""
    """What the model wrote beside the call (tool mode), capped; the approver reads it as context."""
    program: str = ""
    """Code mode: the program that made the call, capped."""
    input_schema: dict[str, Any] | None = None
    """The tool's input schema, so a console can show each argument as the tool describes it."""
    description: str = ""
    """The tool's own description."""


class ApprovalDecision(BaseModel):
    """The argument of the ``approve`` and ``reject`` Updates."""

    model_config = ConfigDict(extra="forbid")

    approval_id: str = Field(min_length=1, max_length=200)
    note: str = Field(default="", max_length=2000)
    approver: str = Field(default="", max_length=200)


class ApprovalRecord(BaseModel):
    """How a pending call was decided (the Update's result)."""

    approval_id: str
    tool: str
    outcome: ApprovalOutcome
    approver: str = ""
    note: str = ""
    decided_at: datetime
    waited_seconds: float = 0.0


NoticeKind = Literal["waiting", "reminder"]


class ApprovalNotice(BaseModel):
    """The ``approval.notify`` activity's input: one waiting call, for the webhooks of its tool or agent.

    It names no webhook URL and no secret: those stay in the worker's settings."""

    kind: NoticeKind = "waiting"
    delivery_id: str
    """Sent as ``X-AgentSteps-Delivery`` and ``Idempotency-Key``: the same on every retry."""
    workflow_id: str
    agent: str = ""
    """The spec's name (webhooks may be chosen per agent)."""
    pending: PendingApproval


class NoticeDelivery(BaseModel):
    """What ``approval.notify`` delivered (its result, so the run's history records it)."""

    delivery_id: str
    kind: NoticeKind = "waiting"
    delivered: list[str] = Field(default_factory=list)
    """The names of the webhooks that accepted it (2xx); never their URLs."""


class WebhookFilter(BaseModel):
    """Which calls one configured webhook is told of: its ``tools`` and ``agents`` (empty: all)."""

    tools: list[str] = Field(default_factory=list)
    agents: list[str] = Field(default_factory=list)

    def wants(self, tool: str, agent: str) -> bool:
        return (not self.tools or tool in self.tools) and (not self.agents or agent in self.agents)


class ApprovalTargets(BaseModel):
    """``approval.targets``' answer: the filters of the worker's webhooks, never their URLs or secrets.
    A run asks once, at its first waiting call, so a deployment without webhooks schedules no notice."""

    webhooks: list[WebhookFilter] = Field(default_factory=list)

    def wants(self, tool: str, agent: str) -> bool:
        return any(w.wants(tool, agent) for w in self.webhooks)


def card_anchor(workflow_id: str, approval_id: str) -> str:
    """A waiting call's element id on the console's pages (a notice links to it): no identifier shown."""
    return "c" + hashlib.sha256(f"{workflow_id}\n{approval_id}".encode()).hexdigest()[:16]


def decision_link_signature(secret: str, workflow_id: str, approval_id: str, decision: str, expires: int) -> str:
    """The signature of an approve/reject link a notice carries: HMAC-SHA256 under the console's
    ``link_secret`` over everything the link names, so no part of it can be changed or made up."""
    text = "\n".join(("agentsteps-decision-link-v1", workflow_id, approval_id, decision, str(expires)))
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


def parse_decision(raw: Any) -> ApprovalDecision:
    """The ``approve`` / ``reject`` argument from any client, or ``ValueError`` naming the bad field."""
    if isinstance(raw, ApprovalDecision):
        return raw
    try:
        return ApprovalDecision.model_validate(raw)
    except ValidationError as exc:
        detail = "; ".join(f"{json_path('$', e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ValueError(
            f'a decision is a JSON object {{"approval_id": "...", "note": "...", "approver": "..."}}; {detail}'
        ) from None


def rejection_message(record: ApprovalRecord) -> str:
    """What the model reads as the tool's error after a rejection or a timeout."""
    if record.outcome == "timed_out":
        return f"The call to {record.tool} was not approved in time ({record.note}); it did not run."
    who = f" by {record.approver}" if record.approver else ""
    note = f": {record.note}" if record.note else ""
    return f"The call to {record.tool} was rejected{who}{note}. It did not run."


__all__ = [
    "decision_link_signature",
    "card_anchor",
    "ApprovalNotice",
    "ApprovalTargets",
    "NoticeDelivery",
    "WebhookFilter",
    "NoticeKind",
    "ApprovalDecision",
    "ApprovalOutcome",
    "ApprovalRecord",
    "PendingApproval",
    "parse_decision",
    "rejection_message",
]
