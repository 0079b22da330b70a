"""The one step engine: what ``AgentWorkflow`` and every session turn run.

``opening`` is the system message for a spec (code mode adds the stubs);
``run_steps`` runs the spec's loop (tool loop or code mode) from a history
that ends with the user's message, on an ``AgentRun`` that holds the result
and the history it leaves. A one-shot run and a session turn differ only in
the history they start from and the ``scope`` of their keys.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import AgentResult, AgentSpec, Message, ToolSchema
    from ..contracts.llm.preconditions import check_spec
    from ..contracts.spec import key_scope_problem
    from ..contracts.llm.tools import catalog_digest
    from .calls import describe_tools
    from .agent_run import AgentRun
    from .code_mode import code_system_prompt, run_code_mode
    from .tool_loop import run_tool_loop


async def spec_tools(spec: AgentSpec) -> list[ToolSchema]:
    """The worker's schemas for the spec's tools; an invalid spec fails typed (``InvalidSpecError``)."""
    tools = await describe_tools(spec.tools, spec.tool_policy) if spec.tools else []
    violations = check_spec(spec, {t.name: t for t in tools})
    if violations:
        detail = "; ".join(f"{v.path}: {v.message}" for v in violations)
        raise ApplicationError(
            f"invalid agent spec: {detail}",
            *[v.model_dump(mode="json") for v in violations],
            type="InvalidSpecError",
            non_retryable=True,
        )
    return tools


def check_key_scope(scope: str | None) -> None:
    """A bad ``key_scope`` fails the run typed before anything runs (no command: nothing changes for valid ones)."""
    problem = key_scope_problem(scope)
    if problem is not None:
        raise ApplicationError(f"invalid run input: $.key_scope: {problem}", type="InvalidSpecError",
                               non_retryable=True)


def opening(spec: AgentSpec, tools: list[ToolSchema]) -> Message:
    if spec.mode == "code":
        return Message.system(code_system_prompt(spec, tools))
    return Message.system(spec.system_prompt)


async def run_steps(run: AgentRun, history: list[Message], tools: list[ToolSchema]) -> AgentResult:
    run.tools = {t.name: t for t in tools}
    # The schemas themselves are in history (the tools.describe result); the digest lets an audit compare
    # them with a catalog. Pure, no command: runs recorded before it replay unchanged.
    run.result.catalog_digest = catalog_digest(tools) if tools else ""
    if run.spec.mode == "code":
        return await run_code_mode(run, history, tools)
    return await run_tool_loop(run, history, tools)


__all__ = ["check_key_scope", "opening", "run_steps", "spec_tools"]
