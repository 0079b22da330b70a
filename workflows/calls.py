"""The workflow side of the three model/tool activities, for every workflow.

Agent tool loop, code mode, pipeline and monitor all call ``llm.call``,
``tools.call`` and ``tools.describe`` through here, so the commands they issue
(activity name, input, summary, options) and the token accounting cannot drift
apart. Deterministic: each function only schedules an activity (and, for a
model call that only older workers took during a rolling upgrade, a timer
before scheduling it again: ``releases/older_workers.py``).

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
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from ..contracts import LLMRequest, LLMResponse, ToolCallInput, ToolCallResult, ToolSchema, Usage
    from ..contracts.code.carried import CarriedProgram, CarryingCallInput, CarryingCallResult, program_outcome
    from ..contracts.code.program import CallOutcome
    from ..contracts.errors import BudgetExceededError, ToolNotSentError
    from ..contracts.llm.next_call import NextModelCall
    from ..contracts.llm.tools import Delivery, ToolsDescribeInput, outcome_unknown
    from ..contracts.names import LLM_CALL_PLAN_FIRST, TOOLS_CALL, TOOLS_DESCRIBE
    from ..contracts.quotas.plan import PlanFirstAnswer
    from ..contracts.quotas.wire import QuotaPlan
    from ..contracts.spec import ActivityPolicy
    from ..failures import failure_type, to_application_error
    from .activity_options import activity_options
    from .releases.gates import cancel_ends_at_most_once_call, retries_at_most_once_after_any_failure
    from .releases.older_workers import llm_activity, until_an_upgraded_worker_takes_it


class UsageLedger(Protocol):
    """Whatever a run reports its tokens on: ``AgentResult``, ``PipelineResult``, ``MonitorReport``."""

    usage: Usage


class PlanFirst(Exception):
    """The worker has a quota plan for the run's tenant: nothing was sent; the run calls again under ``plan``."""

    def __init__(self, plan: QuotaPlan) -> None:
        super().__init__("the worker's quota plan comes before the call")
        self.plan = plan


async def call_llm(
    request: LLMRequest,
    policy: ActivityPolicy,
    ledger: UsageLedger,
    *,
    summary: str | None = None,
    token_budget: int | None = None,
    plan_first: bool = False,
    tenant: str | None = None,
) -> LLMResponse:
    """One contracted model call; its billable tokens go on ``ledger``.

    With ``token_budget``, going over it fails the run (typed, not retried). With ``plan_first`` the run does
    not know its quota plan yet: the call is ``llm.call.plan_first`` for ``tenant``, and raises ``PlanFirst``
    when the worker has a plan (nothing was sent).
    """
    schedule = summary or f"chat {request.config.model}"
    response: LLMResponse
    if plan_first:
        first = request.model_copy(update={"tenant": tenant})
        answer: PlanFirstAnswer = await until_an_upgraded_worker_takes_it(
            LLM_CALL_PLAN_FIRST,
            lambda: workflow.execute_activity(
                LLM_CALL_PLAN_FIRST, first, result_type=PlanFirstAnswer, summary=schedule, **activity_options(policy)
            ),
        )
        if answer.response is None:
            assert answer.plan is not None  # the answer's validator: one of the two
            raise PlanFirst(answer.plan)
        response = answer.response
    else:
        name = llm_activity(request)
        response = await until_an_upgraded_worker_takes_it(
            name,
            lambda: workflow.execute_activity(
                name, request, result_type=LLMResponse, summary=schedule, **activity_options(policy)
            ),
        )
    account(response, ledger, token_budget)
    return response


def account(response: LLMResponse, ledger: UsageLedger, token_budget: int | None) -> None:
    """A model call's billable tokens on ``ledger``; going over ``token_budget`` fails the run."""
    ledger.usage = ledger.usage + response.usage.billable()
    if response.context is not None:  # a summary the context policy asked for
        ledger.usage = ledger.usage + response.context.usage
    if token_budget is not None and ledger.usage.total_tokens > token_budget:
        raise budget_exceeded(f"token budget exceeded: {ledger.usage.total_tokens} > {token_budget}")


def budget_exceeded(message: str) -> ApplicationError:
    """The run's typed failure for a spent token or step budget: not retried."""
    return to_application_error(BudgetExceededError(message))


async def call_tool(
    name: str,
    arguments: str,
    *,
    call_id: str,
    key: str,
    policy: ActivityPolicy,
    delivery: Delivery | None = None,
    store_for: str = "",
    store_cap: int | None = None,
    program: CarriedProgram | None = None,
    next_call: NextModelCall | None = None,
) -> ToolCallResult:
    """One tool call. ``key`` must be stable across retries, crashes and replays: the side effect runs once.

    An ``at_most_once`` call is one attempt as far as Temporal knows: only a
    ``ToolNotSentError`` (raised by code that knows the request never left the
    worker) is tried again, here. The SDK reports any other activity exception as
    retryable too (``WorkerShutdown`` past the grace period, a failed upload of the
    result, anything raised after the tool ran), so that proves nothing: it, a
    timeout or a lost worker becomes an ``OUTCOME_UNKNOWN`` error result for the
    model. A workflow cancel during the call cancels the run. ``program``: the code-mode program waiting
    on this call alone, which the activity resumes after the tool (never for an at-most-once call, whose
    activity must end as soon as the tool has answered). ``next_call``: the model call after this call, which
    the activity makes after the tool (``contracts/llm/next_call.py``); its time goes on top of the tool's.
    """
    call = ToolCallInput(
        name=name,
        arguments=arguments,
        call_id=call_id,
        idempotency_key=key,
        delivery=delivery,
        store_for=store_for,
        store_cap=store_cap,
    )
    if (program is not None or next_call is not None) and delivery != "at_most_once":
        carrying = CarryingCallInput(**dict(call), program=program, next_call=next_call)
        options = activity_options(policy)
        summary = f"execute_tool {name}"
        if next_call is not None:
            options["start_to_close_timeout"] += timedelta(seconds=next_call.seconds)
            summary += f", then chat {next_call.request.config.model}"
        answer: CarryingCallResult = await workflow.execute_activity(
            TOOLS_CALL, carrying, result_type=CarryingCallResult, summary=summary, **options
        )
        return answer
    if delivery != "at_most_once":
        result: ToolCallResult = await workflow.execute_activity(
            TOOLS_CALL, call, result_type=ToolCallResult, summary=f"execute_tool {name}", **activity_options(policy)
        )
        return result
    options = activity_options(policy)
    options["retry_policy"] = RetryPolicy(maximum_attempts=1)
    delay = policy.initial_interval_seconds
    for attempt in range(1, policy.max_attempts + 1):
        try:
            result = await workflow.execute_activity(
                TOOLS_CALL, call, result_type=ToolCallResult, summary=f"execute_tool {name} (at most once)", **options
            )
            return result
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.non_retryable:
                raise
            if isinstance(cause, CancelledError) and cancel_ends_at_most_once_call():
                raise  # the run was cancelled: not an outcome to tell the model
            not_sent = isinstance(cause, ApplicationError) and (
                cause.type == failure_type(ToolNotSentError) or retries_at_most_once_after_any_failure()
            )
            if not not_sent:
                return outcome_unknown(call, _why(cause or exc))
            if attempt == policy.max_attempts:
                raise
        await workflow.sleep(timedelta(seconds=delay))
        delay = min(delay * 2, policy.maximum_interval_seconds)
    raise AssertionError("unreachable: the loop returns or raises")


def _why(cause: BaseException) -> str:
    """What the model is told about the failure: an activity's own failure by its type only (its message
    may carry what the worker holds, a path or a DSN); Temporal's (a timeout) as it is."""
    if isinstance(cause, ApplicationError):
        return f"the call failed with {cause.type or 'an error'}"
    return f"{type(cause).__name__}: {cause}"


async def describe_tools(names: list[str], policy: ActivityPolicy) -> list[ToolSchema]:
    """The worker's schemas for ``names``; names it does not offer are left out."""
    schemas: list[ToolSchema] = await workflow.execute_activity(
        TOOLS_DESCRIBE,
        ToolsDescribeInput(names=names),
        result_type=list[ToolSchema],
        **activity_options(policy),
    )
    return schemas


def call_outcome(call_id: int, result: ToolCallResult) -> CallOutcome:
    """What a sandboxed program sees for a tool result (the same function a carried program is resumed by)."""
    return program_outcome(call_id, result)


__all__ = [
    "PlanFirst",
    "UsageLedger",
    "account",
    "budget_exceeded",
    "call_llm",
    "call_outcome",
    "call_tool",
    "describe_tools",
]
