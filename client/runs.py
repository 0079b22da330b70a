"""Starting and following agent runs from Python (what a backend calls)."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Callable, Mapping

from temporalio.client import Client, WorkflowHandle

from ..contracts import (
    AgentInput,
    AgentResult,
    AgentSpec,
    InvalidSpecError,
    Step,
    ToolSchema,
    Violation,
    ViolationKind,
)
from ..contracts.names import AGENT_WORKFLOW, STEPS_QUERY
from ..contracts.quotas.config import tenant_problem
from ..contracts.quotas.wire import QuotaPlan
from ..contracts.spec import key_scope_problem
from ..contracts.spec_check import check_spec
from ..failures.unwrap import typed_failures
from .search_attributes import run_start_attributes


def validate_key_scope(key_scope: str | None) -> None:
    """Raise InvalidSpecError for a ``key_scope`` the workflow would refuse (``AgentInput.key_scope``)."""
    problem = key_scope_problem(key_scope)
    if problem is not None:
        raise InvalidSpecError(
            [
                Violation(
                    contract="run_input",
                    phase="pre",
                    kind=ViolationKind.invalid_config,
                    path="$.key_scope",
                    message=problem,
                )
            ]
        )


def ignored_plan(quota: QuotaPlan | None) -> None:
    """A ``quota`` argument from a caller written before the worker decided: warned about, never sent."""
    if quota is not None:
        warnings.warn(
            "quota= is ignored: the worker's [worker.quotas] config decides a run's quotas and budget",
            DeprecationWarning,
            stacklevel=3,
        )


def validate_tenant(tenant: str | None) -> None:
    """Raise InvalidSpecError for a ``tenant`` the workflow would refuse (``AgentInput.tenant``)."""
    problem = tenant_problem(tenant)
    if problem is not None:
        raise InvalidSpecError(
            [
                Violation(
                    contract="run_input",
                    phase="pre",
                    kind=ViolationKind.invalid_config,
                    path="$.tenant",
                    message=problem,
                )
            ]
        )


def validate_spec(spec: AgentSpec, known_tools: Mapping[str, ToolSchema] | None = None) -> None:
    """Raise InvalidSpecError naming the field, before anything is started.

    Without ``known_tools`` the tool names cannot be checked here; the workflow
    checks them against the worker's catalog and fails typed instead.
    """
    violations = check_spec(spec, known_tools or {})
    if known_tools is None:
        violations = [v for v in violations if v.kind is not ViolationKind.unknown_tool_in_spec]
    if violations:
        raise InvalidSpecError(violations)


async def start_agent_run(
    client: Client,
    spec: AgentSpec,
    user_input: str,
    *,
    task_queue: str = "agentsteps",
    workflow_id: str | None = None,
    known_tools: Mapping[str, ToolSchema] | None = None,
    key_scope: str | None = None,
    tenant: str | None = None,
    quota: QuotaPlan | None = None,
) -> WorkflowHandle[object, AgentResult]:
    """Validate ``spec`` and start a run. ``key_scope``: see ``AgentInput.key_scope`` (dedupe across runs).

    ``tenant`` names the customer the run bills to; the worker's config decides its quotas, budget and prices.
    ``quota`` is deprecated and never sent (workers ignore a plan in the input; docs/quotas.md).
    The console's search attributes start with the run (free, part of the start), so the run
    does not upsert them."""
    validate_spec(spec, known_tools)
    validate_key_scope(key_scope)
    validate_tenant(tenant)
    ignored_plan(quota)
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input=user_input, key_scope=key_scope, tenant=tenant),
        id=workflow_id or f"agent-{spec.name}-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=AgentResult,
        search_attributes=run_start_attributes(spec, tenant),
    )


async def follow(
    handle: WorkflowHandle[object, AgentResult],
    on_step: Callable[[Step], None],
    interval: float = 0.3,
) -> AgentResult:
    """Wait for the result, reporting every step exactly once, in order, as it happens.

    A run that fails raises its typed error (docs/failures.md: ``BudgetExceededError``,
    ``ContractViolationError``...), ``from`` Temporal's ``WorkflowFailureError``; a failure that is
    not one of ours (a timeout, a termination, a cancel) stays the ``WorkflowFailureError``."""
    result_task = asyncio.ensure_future(handle.result())
    shown = 0
    while not result_task.done():
        try:
            steps = await handle.query(STEPS_QUERY, shown, result_type=list[Step])
        except Exception:  # a query can race the run's start or end; the result has the rest
            steps = []
        for step in steps:
            on_step(step)
        shown += len(steps)
        await asyncio.wait([result_task], timeout=interval)
    with typed_failures():
        result = result_task.result()
    for step in result.steps[shown:]:
        on_step(step)
    return result
