"""The one step engine: what ``AgentWorkflow`` and every session turn run.

``opening`` is the system message for a spec (code mode adds the stubs);
``run_steps`` runs the spec's loop (tool loop or code mode) from a history
that ends with the user's message, on an ``AgentRun`` that holds the result
and the history it leaves. A one-shot run and a session turn differ only in
how their ``AgentRun`` is built (``one_shot`` / ``for_turn``) and the history
they start from.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts.errors import InvalidSpecError
    from ..contracts import AgentResult, AgentSpec, Message, ToolSchema
    from ..contracts.spec_check import check_spec
    from ..failures import to_application_error
    from .calls import describe_tools
    from .agent_run import AgentRun
    from .code_mode import code_system_prompt, run_code_mode
    from .tool_loop import run_tool_loop


async def spec_tools(spec: AgentSpec) -> list[ToolSchema]:
    """The worker's schemas for the spec's tools; an invalid spec fails typed (``InvalidSpecError``)."""
    tools = await describe_tools(spec.tools, spec.tool_policy) if spec.tools else []
    violations = check_spec(spec, {t.name: t for t in tools})
    if violations:
        raise to_application_error(InvalidSpecError(violations), *[v.model_dump(mode="json") for v in violations])
    return tools


def opening(spec: AgentSpec, tools: list[ToolSchema]) -> Message:
    if spec.mode == "code":
        return Message.system(code_system_prompt(spec, tools))
    return Message.system(spec.system_prompt)


async def run_steps(run: AgentRun, history: list[Message]) -> AgentResult:
    if run.spec.mode == "code":
        return await run_code_mode(run, history)
    return await run_tool_loop(run, history)


__all__ = ["opening", "run_steps", "spec_tools"]
