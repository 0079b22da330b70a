"""Workflow-side metrics through Temporal's replay-safe meter.

``workflow.metric_meter()`` drops emissions while a workflow replays, so these
never count twice when a worker rebuilds a run from history.
"""

from __future__ import annotations

from temporalio import workflow

_LATENCY_UNIT = "s"


def record_step(mode: str, seconds: float) -> None:
    workflow.metric_meter().create_histogram_float(
        "agentsteps_agent_step_seconds", "Agent step latency.", _LATENCY_UNIT
    ).record(seconds, {"mode": mode})


def record_run(outcome: str, seconds: float, steps: int) -> None:
    meter = workflow.metric_meter()
    meter.create_counter("agentsteps_agent_runs", "Agent runs by outcome.").add(1, {"outcome": outcome})
    meter.create_histogram_float(
        "agentsteps_agent_run_seconds", "Agent run end-to-end latency.", _LATENCY_UNIT
    ).record(seconds, {"outcome": outcome})
    meter.create_histogram("agentsteps_agent_steps_per_run", "Steps per agent run.").record(steps)


def record_reprompt(contract: str, kind: str) -> None:
    workflow.metric_meter().create_counter("agentsteps_reprompts", "Re-prompts after a violation.").add(
        1, {"contract": contract, "kind": kind}
    )


def record_degradation(reason: str, target: str) -> None:
    workflow.metric_meter().create_counter("agentsteps_degradations", "Degradations by reason.").add(
        1, {"reason": reason, "target": target}
    )
