"""Failed runs say why: ``agentsteps_agent_runs_total{outcome="failed", reason=...}`` from real failing runs.

A real worker on a metered client (``telemetry.runtime.build_runtime``), runs
that fail for each reason against the scripted model, and the counter read
from the prometheus-client registry the endpoint serves.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agent_support import make_spec
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState, TimeoutError, TimeoutType

from agentsteps.contracts import AgentInput
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.telemetry.metrics import REGISTRY
from agentsteps.telemetry.runtime import collector_for
from agentsteps.telemetry.workflow_metrics import RUN_FAILURE_REASONS, fails_the_run, failure_reason
from agentsteps.worker import running_worker

SCHEMA = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


def failed_runs(task_queue: str) -> dict[str, float]:
    collector = collector_for(REGISTRY)
    assert collector is not None
    out: dict[str, float] = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name == "agentsteps_agent_runs_total" and sample.labels.get("task_queue") == task_queue:
                if sample.labels["outcome"] == "failed":
                    out[sample.labels["reason"]] = out.get(sample.labels["reason"], 0) + sample.value
    return out


CASES = {
    # The token budget is spent by the first answer.
    "budget": ({"replies": [{"content": "x " * 50}] * 3}, {"token_budget": 10}),
    # The answer breaks the output schema; no re-prompt, no fallback, no default.
    "contract": ({"replies": [{"content": "not json"}] * 3}, {"output_schema": SCHEMA, "reprompt_budget": 0}),
    # The provider refuses the request (400): not retried.
    "provider": ({"replies": [{"fault": {"status": 400, "message": "bad request"}}]}, {}),
    # A tool no worker offers.
    "invalid_spec": ({"replies": []}, {"tools": ["no_such_tool"]}),
    # The model answers after the call's start-to-close, every attempt.
    "timeout": (
        {"replies": [{"content": "late", "delay_seconds": 3}] * 2},
        {"llm_policy": ActivityPolicy(start_to_close_seconds=1, max_attempts=1)},
    ),
}


async def test_each_failed_run_is_counted_once_under_its_reason(metered_client, settings, scripted):
    async with running_worker(metered_client, settings):
        for reason, (script, overrides) in CASES.items():
            scripted.set_script(script)
            spec = make_spec(**{"tools": [], **overrides})
            with pytest.raises(WorkflowFailureError):
                await metered_client.execute_workflow(
                    AGENT_WORKFLOW,
                    AgentInput(spec=spec, input="go"),
                    id=f"why-{reason}-{uuid.uuid4().hex[:6]}",
                    task_queue=settings.task_queue,
                )
        # Cancelled by the caller (Temporal cancellation) while the model thinks.
        scripted.set_script({"replies": [{"content": "slow", "delay_seconds": 30}]})
        handle = await metered_client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=[]), input="go"),
            id=f"why-cancel-{uuid.uuid4().hex[:6]}",
            task_queue=settings.task_queue,
        )
        for _ in range(200):
            if scripted.requests:
                break
            await asyncio.sleep(0.05)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        collector_for(REGISTRY).drain()
        for _ in range(50):
            if "cancelled" in failed_runs(settings.task_queue):
                break
            await asyncio.sleep(0.1)

    assert failed_runs(settings.task_queue) == {reason: 1.0 for reason in [*CASES, "cancelled"]}


def test_failure_reason_walks_the_cause_chain_and_is_bounded():
    def via_activity(cause: BaseException) -> BaseException:
        err = ActivityError(
            "activity failed",
            scheduled_event_id=1,
            started_event_id=2,
            identity="w",
            activity_type="llm.call",
            activity_id="1",
            retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
        )
        err.__cause__ = cause
        return err

    assert failure_reason(via_activity(ApplicationError("x", type="RetryableProviderError"))) == "provider"
    assert (
        failure_reason(via_activity(TimeoutError("t", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[])))
        == "timeout"
    )
    assert failure_reason(CancelledError("c")) == "cancelled"
    assert failure_reason(asyncio.CancelledError()) == "cancelled"
    assert failure_reason(ApplicationError("x", type="ToolConfigError")) == "invalid_spec"
    # Hostile: any type a caller or tool could name, or a cyclic chain, is "internal".
    for hostile in ("Evil\nType", "x" * 10_000, "", "BudgetExceededError2"):
        assert failure_reason(ApplicationError("x", type=hostile)) == "internal"
    looped = ApplicationError("a", type="Nope")
    looped.__cause__ = looped
    assert failure_reason(looped) == "internal"
    assert set(RUN_FAILURE_REASONS) == {
        "budget",
        "contract",
        "provider",
        "invalid_spec",
        "cancelled",
        "timeout",
        "internal",
    }


def test_a_bug_in_workflow_code_fails_the_task_not_the_run():
    assert not fails_the_run(RuntimeError("bug"))
    assert fails_the_run(ApplicationError("x", type="BudgetExceededError"))
    assert fails_the_run(asyncio.CancelledError())
