"""The one step engine: what ``AgentWorkflow`` and every session turn run.

``opening`` is the system message for a spec (code mode adds the stubs);
``run_steps`` runs the spec's loop (tool loop or code mode) from a history
that ends with the user's message, on an ``AgentRun`` that holds the result
and the history it leaves. A one-shot run and a session turn differ only in
how their ``AgentRun`` is built (``one_shot`` / ``for_turn``) and the history
they start from.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import AgentResult, AgentSpec, ForkOrigin, Message, ToolSchema, Violation, ViolationKind
    from ..contracts.code.stubs import program_functions
    from ..contracts.errors import InvalidSpecError
    from ..contracts.quotas.config import tenant_problem
    from ..contracts.spec import key_scope_problem
    from ..contracts.spec_check import check_spec
    from ..failures import to_application_error
    from .agent_run import AgentRun
    from .calls import describe_tools
    from .code_mode import code_system_prompt, run_code_mode
    from .tool_loop import run_tool_loop


async def spec_tools(spec: AgentSpec) -> list[ToolSchema]:
    """The worker's schemas for the spec's tools; an invalid spec fails typed (``InvalidSpecError``)."""
    tools = await describe_tools(spec.tools, spec.tool_policy) if spec.tools else []
    _refuse(check_spec(spec, {t.name: t for t in tools}, whole_catalog=False))
    return tools


def resolves_tools_lazily(spec: AgentSpec, release: bool) -> bool:
    """A one-shot tool-mode run under ``RELEASE_PATCH`` has its first ``llm.call`` resolve its tool names:
    one activity (a billable action) less. Code mode needs the schemas for its prompt first."""
    return release and spec.mode == "tools" and bool(spec.tools)


def check_spec_but_tools(spec: AgentSpec) -> None:
    """Everything ``spec_tools`` checks but the tools, which the first ``llm.call`` checks as it resolves them."""
    _refuse(check_spec(spec, None))


def _refuse(violations: list[Violation]) -> None:
    if violations:
        raise to_application_error(InvalidSpecError(violations), *[v.model_dump(mode="json") for v in violations])


def check_key_scope(scope: str | None) -> None:
    """A bad ``key_scope`` fails the run typed before anything runs (no command: nothing changes for valid ones)."""
    _refuse_input("$.key_scope", key_scope_problem(scope))


def check_tenant(tenant: str | None) -> None:
    """A bad ``tenant`` fails the run typed before anything runs (no command)."""
    _refuse_input("$.tenant", tenant_problem(tenant))


def _refuse_input(path: str, problem: str | None) -> None:
    if problem is not None:
        _refuse(
            [
                Violation(
                    contract="run_input", phase="pre", kind=ViolationKind.invalid_config, path=path, message=problem
                )
            ]
        )


def opening(spec: AgentSpec, tools: list[ToolSchema]) -> Message:
    if spec.mode == "code":
        return Message.system(code_system_prompt(spec, tools))
    return Message.system(spec.system_prompt)


async def run_steps(run: AgentRun, history: list[Message], fork: ForkOrigin | None = None) -> AgentResult:
    if run.spec.mode == "code":
        return await run_code_mode(run, history, fork)
    return await run_tool_loop(run, history)


def python_name(spec: AgentSpec, tools: list[ToolSchema]) -> Callable[[str], str]:
    """How the model knows a tool: by its name, or in code mode by the program function calling it."""
    names = {f.tool: f.python_name for f in program_functions(tools)} if spec.mode == "code" else {}
    return lambda tool: names.get(tool, tool)


def check_fork(spec: AgentSpec, tools: list[ToolSchema], fork: ForkOrigin) -> None:
    """A fork inside a program needs a code-mode spec offering every function its pending calls name;
    anything else fails the fork typed before it runs (``fork_run`` refuses it first)."""
    if fork.program is None:
        return
    known = {f.python_name for f in program_functions(tools)}
    missing = sorted({c.function for c in fork.program.paused.calls} - known)
    problem = None
    if spec.mode != "code":
        problem = "a fork inside a program runs in code mode"
    elif fork.program.paused.state != "pending" or (
        fork.program.paused.snapshot is None and fork.program.paused.replay is None
    ):
        problem = "a fork inside a program starts from the program paused (a snapshot or a replay log)"
    elif missing:
        problem = f"the program's pending calls name functions the fork's tools do not offer: {', '.join(missing)}"
    if problem is not None:
        violation = Violation(
            contract="fork", phase="pre", kind=ViolationKind.invalid_config, path="$.fork.program", message=problem
        )
        raise to_application_error(InvalidSpecError([violation]), violation.model_dump(mode="json"))


__all__ = [
    "check_fork",
    "check_key_scope",
    "check_tenant",
    "python_name",
    "check_spec_but_tools",
    "opening",
    "resolves_tools_lazily",
    "run_steps",
    "spec_tools",
]
