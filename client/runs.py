"""Starting and following agent runs from Python (what a backend calls)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping

from temporalio.client import Client, WorkflowHandle

from ..contracts import AgentInput, AgentResult, AgentSpec, InvalidSpecError, Step, ToolSchema, ViolationKind
from ..contracts.names import AGENT_WORKFLOW, STEPS_QUERY
from ..contracts.spec_check import check_spec


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
) -> WorkflowHandle[object, AgentResult]:
    validate_spec(spec, known_tools)
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input=user_input),
        id=workflow_id or f"agent-{spec.name}-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )


async def follow(
    handle: WorkflowHandle[object, AgentResult],
    on_step: Callable[[Step], None],
    interval: float = 0.3,
) -> AgentResult:
    """Wait for the result, reporting every step exactly once, in order, as it happens."""
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
    result = result_task.result()
    for step in result.steps[shown:]:
        on_step(step)
    return result
