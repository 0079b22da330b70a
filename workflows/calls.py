"""The workflow side of the three model/tool activities, for every workflow.

Agent tool loop, code mode, pipeline and monitor all call ``llm.call``,
``tools.call`` and ``tools.describe`` through here, so the commands they issue
(activity name, input, summary, options) and the token accounting cannot drift
apart. Deterministic: each function only schedules an activity.

Workflow modules import names from here (``from .calls import call_tool``),
not the module (``from . import calls``): a workflow module runs again in every
run's sandbox, and there the fromlist form skips the pass-through hook and
loads this file from disk on every run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import LLMRequest, LLMResponse, ToolCallInput, ToolCallResult, ToolSchema, Usage
    from ..contracts.errors import BudgetExceededError
    from ..contracts.code.program import CallOutcome
    from ..contracts.json_schema import parse_json
    from ..contracts.names import LLM_CALL, TOOLS_CALL, TOOLS_DESCRIBE
    from ..contracts.spec import ActivityPolicy
    from ..contracts.llm.tools import Delivery, ToolsDescribeInput, outcome_unknown
    from ..failures import to_application_error
    from .activity_options import activity_options


class UsageLedger(Protocol):
    """Whatever a run reports its tokens on: ``AgentResult``, ``PipelineResult``, ``MonitorReport``."""

    usage: Usage


async def call_llm(
    request: LLMRequest,
    policy: ActivityPolicy,
    ledger: UsageLedger,
    *,
    summary: str | None = None,
    token_budget: int | None = None,
) -> LLMResponse:
    """One contracted model call; its billable tokens go on ``ledger``.

    With ``token_budget``, going over it fails the run (typed, not retried).
    """
    response = await workflow.execute_activity(
        LLM_CALL,
        request,
        result_type=LLMResponse,
        summary=summary or f"chat {request.config.model}",
        **activity_options(policy),
    )
    ledger.usage = ledger.usage + response.usage.billable()
    if response.context is not None:  # a summary the context policy asked for
        ledger.usage = ledger.usage + response.context.usage
    if token_budget is not None and ledger.usage.total_tokens > token_budget:
        raise budget_exceeded(f"token budget exceeded: {ledger.usage.total_tokens} > {token_budget}")
    return response


def budget_exceeded(message: str) -> ApplicationError:
    """The run's typed failure for a spent token or step budget: not retried."""
    return to_application_error(BudgetExceededError(message))


async def call_tool(
    name: str, arguments: str, *, call_id: str, key: str, policy: ActivityPolicy, delivery: Delivery | None = None
) -> ToolCallResult:
    """One tool call. ``key`` must be stable across retries, crashes and replays: the side effect runs once.

    An ``at_most_once`` call is one attempt as far as Temporal knows: only a failure
    the activity reports as "not sent" (retryable, raised before the request left
    the worker) is tried again, here; a timeout or a lost worker becomes an
    ``OUTCOME_UNKNOWN`` error result for the model.
    """
    call = ToolCallInput(name=name, arguments=arguments, call_id=call_id, idempotency_key=key, delivery=delivery)
    if delivery != "at_most_once":
        return await workflow.execute_activity(
            TOOLS_CALL, call, result_type=ToolCallResult, summary=f"execute_tool {name}", **activity_options(policy)
        )
    options = activity_options(policy)
    options["retry_policy"] = RetryPolicy(maximum_attempts=1)
    delay = policy.initial_interval_seconds
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return await workflow.execute_activity(
                TOOLS_CALL, call, result_type=ToolCallResult, summary=f"execute_tool {name} (at most once)", **options
            )
        except ActivityError as exc:
            cause = exc.cause
            not_sent = isinstance(cause, ApplicationError) and not cause.non_retryable
            if isinstance(cause, ApplicationError) and cause.non_retryable:
                raise
            if not not_sent:
                return outcome_unknown(call, str(cause or exc))
            if attempt == policy.max_attempts:
                raise
        await workflow.sleep(timedelta(seconds=delay))
        delay = min(delay * 2, policy.maximum_interval_seconds)
    raise AssertionError("unreachable: the loop returns or raises")


async def describe_tools(names: list[str], policy: ActivityPolicy) -> list[ToolSchema]:
    """The worker's schemas for ``names``; names it does not offer are left out."""
    return await workflow.execute_activity(
        TOOLS_DESCRIBE,
        ToolsDescribeInput(names=names),
        result_type=list[ToolSchema],
        **activity_options(policy),
    )


def call_outcome(call_id: int, result: ToolCallResult) -> CallOutcome:
    """What a sandboxed program sees for a tool result: its value, or the error it raises."""
    if result.is_error:
        return CallOutcome(call_id=call_id, error=result.content)
    if result.structured is not None:
        return CallOutcome(call_id=call_id, value=result.structured)
    # Strict parsing: a hostile result nested 100k deep must not crash the workflow task.
    value, why_not_json = parse_json(result.content)
    return CallOutcome(call_id=call_id, value=result.content if why_not_json else value)


__all__ = [
    "UsageLedger", "budget_exceeded", "call_llm", "call_outcome", "call_tool", "describe_tools",
]
