"""Code mode: the model writes a program; the workflow drives it, deterministically.

Per step: ask the model for a program against typed stubs, check it
(``code.check``), then run it in Monty through ``code.start`` / ``code.resume``.
Every call the program makes is its own activity (``tools.call`` or
``llm.call``), keyed by the effect (``effects.py``: the same call in a
re-prompted or fallback program has the same key, and a completed
side-effecting call is answered from the run's record instead of running
again), and calls that pause together run concurrently. The interpreter never runs here, and between
segments the program is only a signed snapshot reference in history.

Violations (no program, syntax or type errors, a failed program, a value that
breaks the output schema) go down the same ladder as the tool loop.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        AgentResult,
        AgentSpec,
        ForkOrigin,
        LLMRequest,
        LLMResponse,
        Message,
        ResponseFormat,
        ToolCallRecord,
        ToolSchema,
        Violation,
        ViolationKind,
    )
    from ..contracts.code.carried import CarriedProgram, carried_pause
    from ..contracts.code.program import (
        LLM_FUNCTION,
        CallOutcome,
        ForkedProgram,
        PendingCall,
        ProgramFunction,
        ProgramLimits,
        ProgramStatus,
        StartProgramInput,
        capped_view,
    )
    from ..contracts.code.stubs import extract_program, generate_stubs, program_functions
    from ..contracts.code.variables import module_names, variable_stubs
    from ..contracts.json_schema import instance_violations
    from ..contracts.persisted_ids import (
        PROGRAM_EFFECT_SCOPE,
        RUN_SCOPE,
        program_call_id,
        program_run_key,
        program_step,
    )
    from ..telemetry import workflow_metrics
    from .agent_run import AgentRun, BudgetRefused
    from .calls import budget_exceeded, call_outcome
    from .effects import RECORD_CHARS, cap
    from .ladder import ViolationLadder
    from .program_driver import check_program, drive_program, program_keys

CONTRACT = "code.program"

PROGRAM_INSTRUCTIONS = """\
Answer by writing one Python program in a ```python block. It runs in a sandbox
with top-level await. Call the functions below (all async: use `await`, and
`asyncio.gather` to run several at once). Filter, sort and join in variables;
do not print raw data. The value of the program's last expression is the
answer, so end with it (JSON-like values only: dict, list, str, number, bool,
None). A failing function raises RuntimeError. There are no files, no
environment, no network and no other modules than the standard library's pure
parts; the clock is fixed.

```python
{stubs}
```"""


def code_system_prompt(spec: AgentSpec, tools: list[ToolSchema]) -> str:
    return f"{spec.system_prompt}\n\n{PROGRAM_INSTRUCTIONS.format(stubs=generate_stubs(tools))}"


async def run_code_mode(run: AgentRun, history: list[Message], origin: ForkOrigin | None = None) -> AgentResult:
    """Run steps from ``history`` (``code_system_prompt`` first, the user's message last) to a program's value.

    A fork inside a source's program (``origin.program``) takes that program as its first step's answer:
    no model call and no check (it ran in the source), the program resumed where the source's paused."""
    resumed = origin.program if origin is not None else None
    spec = run.spec
    ladder = run.ladder()
    limits = spec.code_limits
    tools = list(run.tools.schemas)
    # A session's earlier variables are declared for the type check (the prompt lists them too).
    stubs = generate_stubs(tools) + variable_stubs(run.repl.variables if run.repl else [])
    functions = program_functions(tools)
    python_names = {f.tool: f.python_name for f in functions}
    accepted = len(history)
    run.advance(history)

    for index in range(spec.max_steps):
        if run.cancelled():
            return run.result
        started = workflow.now()
        fork = resumed if index == 0 else None
        if fork is not None:
            response = LLMResponse(message=Message(role="assistant", content=fork.content), model=fork.model)
            violations: list[Violation] = []
            program: str | None = fork.program
        else:
            request = LLMRequest(
                config=ladder.current, messages=history, allowed_model_aliases=spec.allowed_model_aliases
            )
            response = await run.call_llm(request)
            violations = list(response.violations)
            program = None if violations else extract_program(response.message.content)
            if not violations and program is None:
                violations = [
                    _violation(ViolationKind.program_syntax, "$.content", "the answer has no ```python block")
                ]
            if program is not None and not violations:
                violations = await check_program(program, stubs, limits)

        records: list[ToolCallRecord] = []
        value: Any = None
        status = ProgramStatus(state="failed")
        if program is not None and not violations:
            forked = (origin.workflow_id, fork) if origin is not None and fork is not None else None
            status, records = await _execute(run, index, program, functions, limits, ladder, forked)
            if status.state == "completed":
                value = status.value
                if spec.output_schema is not None:
                    violations = instance_violations(
                        value,
                        spec.output_schema,
                        contract=CONTRACT,
                        phase="post",
                        kind=ViolationKind.response_schema_mismatch,
                        path="$",
                        what="the program's value",
                    )
            else:
                assert status.error is not None
                shown = status.output + (
                    f"\n[{status.output_dropped} more characters]" if status.output_dropped else ""
                )
                violations = [
                    _violation(
                        ViolationKind.program_failed,
                        "$.program",
                        f"[{status.error.kind}] {status.error.message}"
                        + (f"\nPrinted output:\n{shown}" if shown else ""),
                    )
                ]

        if not response.violations:
            # The program is the answer's contract check; llm.call counted its own.
            workflow_metrics.record_check(CONTRACT, "post", violations)
        if violations:
            checked = response.model_copy(update={"violations": violations})
            run.record_step(index, "assistant", checked, records, started, program=program)
            note = run.effects_note(lambda tool: python_names.get(tool, tool))
            next_history = run.after_violation(index, ladder, checked, history, accepted, note)
            if next_history is None:
                return run.result
            history = next_history
            continue

        final = response.model_copy(
            update={
                "message": Message(role="assistant", content=capped_view(value, status.output, status.output_dropped))
            }
        )
        run.record_step(index, "final", final, records, started, program=program)
        repl = status.repl if run.repl is not None else None
        return run.finish([*history, final.message], response.model or ladder.current.model, value, repl=repl)

    raise budget_exceeded(f"the run used all {spec.max_steps} steps without a finished program")


async def _execute(
    run: AgentRun,
    index: int,
    program: str,
    functions: list[ProgramFunction],
    limits: ProgramLimits,
    ladder: ViolationLadder,
    forked: tuple[str, ForkedProgram] | None = None,
) -> tuple[ProgramStatus, list[ToolCallRecord]]:
    if run.effects is not None:
        run.effects.new_attempt()
    by_name = {f.python_name: f for f in functions}
    records: dict[int, ToolCallRecord] = {}
    run_key, legacy_run_key = program_keys(program_step(run.scope, index))
    start = StartProgramInput(
        run_key=run_key,
        legacy_run_key=legacy_run_key,
        program=program,
        functions=functions,
        limits=limits,
        now=workflow.now().isoformat(),
        seed=workflow.random().randint(0, 2**62),
    )
    if run.repl is not None:
        known = [v.name for v in run.repl.variables]
        start.repl = run.repl
        start.variable_names = [*known, *(n for n in module_names(program) if n not in known)]
    paused = forked_from = None
    if forked is not None:
        # The source's program where the fork starts; the worker checks its snapshot against the key of the
        # source this run's input names, so no other run's memory can load here.
        source, fork = forked
        step = program_step(RUN_SCOPE, fork.step)  # the source is a one-shot run: its ids carry no scope
        paused, forked_from = fork.paused, program_run_key(source, fork.chain_run_id, step)

    async def run_call(call: PendingCall) -> CallOutcome:
        outcome, _ = await _run_call(run, index, call, by_name[call.function], ladder, records, program)
        return outcome

    status = await drive_program(
        start,
        run_call,
        cancel_siblings=run.features.cancel_siblings,
        paused=paused,
        forked_from=forked_from,
        carry=_Carrier(run, index, by_name, ladder, records, program),
    )
    return status, [records[k] for k in sorted(records)]


class _Carrier:
    """A tool call the program waits on alone, made with the program (``program_driver.CallCarrier``)."""

    def __init__(
        self,
        run: AgentRun,
        index: int,
        by_name: dict[str, ProgramFunction],
        ladder: ViolationLadder,
        records: dict[int, ToolCallRecord],
        program: str,
    ) -> None:
        self._run, self._index, self._by_name = run, index, by_name
        self._ladder, self._records, self._program = ladder, records, program

    def carries(self, call: PendingCall) -> bool:
        function = self._by_name[call.function]
        if function.tool == LLM_FUNCTION or function.long_wait:
            return False
        schema = self._run.tools.schema(function.tool)
        # An at-most-once call's activity must end as soon as its tool answers: a lost worker after that
        # would leave its outcome unknown.
        return schema is not None and schema.delivery != "at_most_once"

    async def __call__(self, call: PendingCall, program: CarriedProgram) -> tuple[CallOutcome, ProgramStatus | None]:
        function = self._by_name[call.function]
        return await _run_call(
            self._run, self._index, call, function, self._ladder, self._records, self._program, program
        )


async def _run_call(
    run: AgentRun,
    index: int,
    call: PendingCall,
    function: ProgramFunction,
    ladder: ViolationLadder,
    records: dict[int, ToolCallRecord],
    program: str,
    carried: CarriedProgram | None = None,
) -> tuple[CallOutcome, ProgramStatus | None]:
    """The call's outcome; with ``carried``, also the program's next pause when the activity resumed it."""
    following: ProgramStatus | None = None
    call_id = program_call_id(run.scope, index, call.call_id)
    if function.tool == LLM_FUNCTION:
        outcome = await _run_llm(run, call, ladder)
        content = json.dumps(outcome.value) if outcome.error is None else outcome.error
    else:
        # Waiting for approval, the program is only a snapshot: the segment ended with the call pending.
        # One logical step per run (scope "program"): every program answers the same request, so an
        # identical call in a re-prompted program is the same effect.
        result = await run.call_tool(
            run.tools.schema(function.tool),
            function.tool,
            call.arguments,
            call_id=call_id,
            scope=PROGRAM_EFFECT_SCOPE,
            approval_id=call_id,
            program=program,
            carried=carried,
        )
        outcome = call_outcome(call.call_id, result)
        content = result.content
        following = carried_pause(result)
    records[call.call_id] = ToolCallRecord(
        call_id=call_id,
        name=function.tool,
        arguments=call.arguments[:RECORD_CHARS],
        content=cap(content),
        is_error=outcome.error is not None,
    )
    return outcome, following


async def _run_llm(run: AgentRun, call: PendingCall, ladder: ViolationLadder) -> CallOutcome:
    args = json.loads(call.arguments)
    prompt, schema = args.get("prompt"), args.get("schema")
    if not isinstance(prompt, str) or (schema is not None and not isinstance(schema, dict)):
        return CallOutcome(call_id=call.call_id, error="llm(prompt: str, schema: dict | None)")
    request = LLMRequest(
        config=ladder.current,
        messages=[Message.user(prompt)],
        response_format=ResponseFormat(json_schema=schema) if schema else None,
        allowed_model_aliases=run.spec.allowed_model_aliases,
    )
    # Same contracts and the same token budget as every other model call.
    try:
        response: LLMResponse = await run.call_llm(request, refusable=True, standalone=True)
    except BudgetRefused as refused:
        return CallOutcome(call_id=call.call_id, error=f"llm() refused: {refused}")
    if response.violations:
        return CallOutcome(call_id=call.call_id, error="; ".join(v.for_model() for v in response.violations))
    content = response.message.content or ""
    return CallOutcome(call_id=call.call_id, value=json.loads(content) if schema else content)


def _violation(kind: ViolationKind, path: str, message: str) -> Violation:
    return Violation(contract=CONTRACT, phase="post", kind=kind, path=path, message=message)


__all__ = ["PROGRAM_INSTRUCTIONS", "code_system_prompt", "run_code_mode"]
