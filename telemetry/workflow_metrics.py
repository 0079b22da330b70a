"""Workflow-side metrics through Temporal's replay-safe meter.

``workflow.metric_meter()`` drops emissions while a workflow replays, so these
never count twice when a worker rebuilds a run from history. They reach
``/metrics`` through ``telemetry.runtime`` (a ``MetricBuffer`` drained into the
prometheus-client registry): counters there gain ``_total``; names are not
prefixed. ``WORKFLOW_METRICS`` lists them for the docs and the dashboard test.

Contract checks made in workflow code (code-mode programs, pipeline edges,
the monitor's nudge contract) go through the meter too, under the very names
the ``llm.call`` activity uses; ``telemetry.runtime`` folds them into those
prometheus-client counters, so one family carries every path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from temporalio import workflow
from temporalio.exceptions import ApplicationError, CancelledError, FailureError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

if TYPE_CHECKING:
    from ..contracts.violations import Violation

_LATENCY_UNIT = "s"

AGENT_STEP_SECONDS = "agentsteps_agent_step_seconds"
AGENT_RUNS = "agentsteps_agent_runs"
AGENT_RUN_SECONDS = "agentsteps_agent_run_seconds"
AGENT_STEPS_PER_RUN = "agentsteps_agent_steps_per_run"
REPROMPTS = "agentsteps_reprompts"
DEGRADATIONS = "agentsteps_degradations"
SESSIONS_STARTED = "agentsteps_sessions_started"
SESSIONS_ENDED = "agentsteps_sessions_ended"
SESSION_TURNS = "agentsteps_session_turns"
SESSION_TURN_SECONDS = "agentsteps_session_turn_seconds"
SESSION_CONTINUED = "agentsteps_session_continued_as_new"
APPROVALS_REQUESTED = "agentsteps_approvals_requested"
APPROVALS_DECIDED = "agentsteps_approvals"
APPROVAL_WAIT_SECONDS = "agentsteps_approval_wait_seconds"
QUOTA_WAIT_SECONDS = "agentsteps_quota_wait_seconds"
QUOTA_WAITS = "agentsteps_quota_waits"
QUOTA_UTILIZATION = "agentsteps_quota_utilization_ratio"
QUOTA_RESERVED_TOKENS = "agentsteps_quota_reserved_tokens"
QUOTA_ACTUAL_TOKENS = "agentsteps_quota_actual_tokens"
QUOTA_THROTTLED = "agentsteps_quota_throttled"
TENANT_SPEND_USD = "agentsteps_tenant_spend_usd"
TENANT_BUDGET_USED = "agentsteps_tenant_budget_used_ratio"
MALFORMED_INPUTS = "agentsteps_malformed_inputs"


class WorkflowMetric(NamedTuple):
    name: str
    kind: str
    """``counter``, ``gauge`` or ``histogram``, as Prometheus types it."""
    labels: tuple[str, ...]
    description: str


WORKFLOW_METRICS = (
    WorkflowMetric(AGENT_STEP_SECONDS, "histogram", ("mode",), "Agent step latency."),
    WorkflowMetric(AGENT_RUNS, "counter", ("outcome", "reason"), "Agent runs by outcome; failed runs say why."),
    WorkflowMetric(AGENT_RUN_SECONDS, "histogram", ("outcome", "reason"), "Agent run end-to-end latency."),
    WorkflowMetric(AGENT_STEPS_PER_RUN, "histogram", (), "Steps per agent run."),
    WorkflowMetric(REPROMPTS, "counter", ("contract", "kind"), "Re-prompts after a violation."),
    WorkflowMetric(DEGRADATIONS, "counter", ("reason", "target"), "Degradations by reason."),
    WorkflowMetric(SESSIONS_STARTED, "counter", (), "Sessions started (active = started - ended)."),
    WorkflowMetric(SESSIONS_ENDED, "counter", ("reason",), "Sessions ended, by reason (closed, idle_timeout)."),
    WorkflowMetric(SESSION_TURNS, "counter", ("outcome",), "Session turns by outcome."),
    WorkflowMetric(SESSION_TURN_SECONDS, "histogram", ("outcome",), "Session turn latency."),
    WorkflowMetric(SESSION_CONTINUED, "counter", (), "Sessions that continued-as-new between turns."),
    WorkflowMetric(APPROVALS_REQUESTED, "counter", ("tool",), "Tool calls that asked a person for approval."),
    WorkflowMetric(
        APPROVALS_DECIDED, "counter", ("outcome",), "Approvals by outcome (approved, rejected, timed_out, withdrawn)."
    ),
    WorkflowMetric(APPROVAL_WAIT_SECONDS, "histogram", ("outcome",), "Time a call waited for its approval."),
    WorkflowMetric(QUOTA_WAIT_SECONDS, "histogram", ("quota",), "Time a model call waited for its quota's grant."),
    WorkflowMetric(
        QUOTA_WAITS,
        "counter",
        ("quota",),
        "Model calls that queued for their quota (no capacity at once), counted when the wait starts.",
    ),
    WorkflowMetric(
        QUOTA_UTILIZATION,
        "gauge",
        ("quota",),
        "Share (0..1) of the quota's binding per-minute limit in use, as its account told at the last grant.",
    ),
    WorkflowMetric(QUOTA_RESERVED_TOKENS, "counter", ("quota",), "Tokens reserved before calls (prompt + max_tokens)."),
    WorkflowMetric(QUOTA_ACTUAL_TOKENS, "counter", ("quota",), "Tokens the same calls really used."),
    WorkflowMetric(
        QUOTA_THROTTLED,
        "counter",
        ("quota",),
        "Provider 429s answered to calls granted by the quota (each lowers its effective limits).",
    ),
    WorkflowMetric(TENANT_SPEND_USD, "counter", ("tenant",), "USD spent by tenant (price table); unconfigured: other."),
    WorkflowMetric(
        TENANT_BUDGET_USED,
        "gauge",
        ("tenant", "period", "limit"),
        "Share of the tenant's budget used (with calls in flight) per period and limit (soft, hard).",
    ),
    WorkflowMetric(
        MALFORMED_INPUTS,
        "counter",
        ("kind", "name"),
        "Starts failed and signals dropped for a wrongly shaped argument (kind: start, signal).",
    ),
)
"""Every metric recorded here. Temporal adds ``namespace``, ``task_queue`` and ``workflow_type`` labels."""


def record_step(mode: str, seconds: float) -> None:
    workflow.metric_meter().create_histogram_float(AGENT_STEP_SECONDS, "Agent step latency.", _LATENCY_UNIT).record(
        seconds, {"mode": mode}
    )


RUN_FAILURE_REASONS = ("budget", "contract", "provider", "invalid_spec", "cancelled", "timeout", "internal")
"""The ``reason`` label of a failed run: a fixed set, so a failure never mints a new series."""

_REASON_BY_TYPE = {
    "BudgetExceededError": "budget",
    "ContractViolationError": "contract",
    "RetryableProviderError": "provider",
    "NonRetryableProviderError": "provider",
    "InvalidSpecError": "invalid_spec",
    "ToolConfigError": "invalid_spec",
    "CompositionError": "invalid_spec",
}


def failure_reason(exc: BaseException) -> str:
    """Why a run failed, as one of ``RUN_FAILURE_REASONS``: the first cause in the chain that says.

    An activity's failure arrives as ``ActivityError`` whose cause is the
    activity's ``ApplicationError`` (its ``type`` names our error class) or a
    ``TimeoutError``; anything unrecognised is ``internal`` (a bug to page on).
    """
    seen: BaseException | None = exc
    for _ in range(16):  # a cause chain is short; a cycle must not hang a workflow task
        if seen is None:
            break
        if isinstance(seen, (asyncio.CancelledError, CancelledError)):
            return "cancelled"
        if isinstance(seen, (TemporalTimeoutError, TimeoutError)):
            return "timeout"
        if isinstance(seen, ApplicationError) and seen.type in _REASON_BY_TYPE:
            return _REASON_BY_TYPE[seen.type]
        seen = seen.__cause__ or getattr(seen, "cause", None)
    return "internal"


def fails_the_run(exc: BaseException) -> bool:
    """Whether ``exc`` leaving the workflow fails the run; anything else fails only the workflow task.

    Temporal retries a failed workflow task (a bug, non-determinism) until it is
    fixed, so counting the run as failed there would count it once per retry.
    """
    return isinstance(exc, (FailureError, asyncio.CancelledError))


def record_run(outcome: str, seconds: float, steps: int, reason: str | None = None) -> None:
    """``reason`` only for failed runs (one of ``RUN_FAILURE_REASONS``); other outcomes carry none."""
    attributes = {"outcome": outcome}
    if reason is not None:
        attributes["reason"] = reason if reason in RUN_FAILURE_REASONS else "internal"
    meter = workflow.metric_meter()
    meter.create_counter(AGENT_RUNS, "Agent runs by outcome.").add(1, attributes)
    meter.create_histogram_float(AGENT_RUN_SECONDS, "Agent run end-to-end latency.", _LATENCY_UNIT).record(
        seconds, attributes
    )
    meter.create_histogram(AGENT_STEPS_PER_RUN, "Steps per agent run.").record(steps)


def record_reprompt(contract: str, kind: str) -> None:
    workflow.metric_meter().create_counter(REPROMPTS, "Re-prompts after a violation.").add(
        1, {"contract": contract, "kind": kind}
    )


def record_degradation(reason: str, target: str) -> None:
    workflow.metric_meter().create_counter(DEGRADATIONS, "Degradations by reason.").add(
        1, {"reason": reason, "target": target}
    )


def record_approval_requested(tool: str) -> None:
    workflow.metric_meter().create_counter(APPROVALS_REQUESTED, "Tool calls that asked a person for approval.").add(
        1, {"tool": tool}
    )


def record_approval_decided(outcome: str, waited_seconds: float) -> None:
    meter = workflow.metric_meter()
    meter.create_counter(APPROVALS_DECIDED, "Approvals by outcome (approved, rejected, timed_out, withdrawn).").add(
        1, {"outcome": outcome}
    )
    meter.create_histogram_float(APPROVAL_WAIT_SECONDS, "Time a call waited for its approval.", _LATENCY_UNIT).record(
        waited_seconds, {"outcome": outcome}
    )


def record_session_started() -> None:
    workflow.metric_meter().create_counter(SESSIONS_STARTED, "Sessions started (active = started - ended).").add(1)


def record_session_ended(reason: str) -> None:
    workflow.metric_meter().create_counter(SESSIONS_ENDED, "Sessions ended, by reason (closed, idle_timeout).").add(
        1, {"reason": reason}
    )


def record_turn(outcome: str, seconds: float) -> None:
    meter = workflow.metric_meter()
    meter.create_counter(SESSION_TURNS, "Session turns by outcome.").add(1, {"outcome": outcome})
    meter.create_histogram_float(SESSION_TURN_SECONDS, "Session turn latency.", _LATENCY_UNIT).record(
        seconds, {"outcome": outcome}
    )


def record_session_continued() -> None:
    workflow.metric_meter().create_counter(SESSION_CONTINUED, "Sessions that continued-as-new between turns.").add(1)


CONTRACT_CHECKS = "agentsteps_contract_checks"
CONTRACT_VIOLATIONS = "agentsteps_contract_violations"
"""Shared with ``telemetry.metrics``: the collector adds workflow-side counts to those counters."""


def record_quota_grant(quota: str, waited_seconds: float, queued: bool, utilization: float, reserved: int) -> None:
    meter = workflow.metric_meter()
    labels = {"quota": quota}
    meter.create_histogram_float(
        QUOTA_WAIT_SECONDS, "Time a model call waited for its quota's grant.", _LATENCY_UNIT
    ).record(waited_seconds, labels)
    del queued  # a wait is counted when it starts, by the account (``record_quota_wait_started``)
    meter.create_gauge_float(QUOTA_UTILIZATION, "Share of the quota's binding per-minute limit in use.").set(
        utilization, labels
    )
    meter.create_counter(QUOTA_RESERVED_TOKENS, "Tokens reserved before calls.").add(reserved, labels)


def record_quota_wait_started(quota: str) -> None:
    """A model call found no capacity and queued: counted now, while it waits, not when its grant comes."""
    workflow.metric_meter().create_counter(QUOTA_WAITS, "Model calls that queued for their quota.").add(
        1, {"quota": quota}
    )


def record_quota_actual(quota: str, tokens: int) -> None:
    workflow.metric_meter().create_counter(QUOTA_ACTUAL_TOKENS, "Tokens the calls really used.").add(
        tokens, {"quota": quota}
    )


def record_quota_throttled(quota: str, answers: int) -> None:
    workflow.metric_meter().create_counter(QUOTA_THROTTLED, "Provider 429s under the quota.").add(
        answers, {"quota": quota}
    )


def record_tenant_spend(tenant: str, usd: float) -> None:
    # Counters take integers: the family is kept in micro-dollars here and scaled back in ``runtime``.
    micro = round(usd * 1_000_000)
    if micro > 0:
        workflow.metric_meter().create_counter(TENANT_SPEND_USD, "USD spent by tenant.").add(micro, {"tenant": tenant})


def record_budget_used(tenant: str, period: str, limit: str, ratio: float) -> None:
    workflow.metric_meter().create_gauge_float(TENANT_BUDGET_USED, "Share of the tenant's budget used.").set(
        ratio, {"tenant": tenant, "period": period, "limit": limit}
    )


def record_malformed_input(kind: str, name: str) -> None:
    workflow.metric_meter().create_counter(
        MALFORMED_INPUTS, "Starts failed and signals dropped for a wrongly shaped argument (kind: start, signal)."
    ).add(1, {"kind": kind, "name": name})


def record_check(contract: str, phase: str, violations: Sequence["Violation"]) -> None:
    """One contract check; a failed one is one violation, labelled with its first violation's kind.

    One violation per failed check keeps violations / checks within [0, 1]
    on every path; the result lists every violation.
    """
    meter = workflow.metric_meter()
    outcome = "fail" if violations else "pass"
    meter.create_counter(CONTRACT_CHECKS, "Contract checks.").add(
        1, {"contract": contract, "phase": phase, "outcome": outcome}
    )
    if violations:
        meter.create_counter(CONTRACT_VIOLATIONS, "Contract violations.").add(
            1, {"contract": contract, "phase": phase, "kind": violations[0].kind.value}
        )
