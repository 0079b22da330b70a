"""Code mode: the model writes a program; the workflow drives it, deterministically.

Per step: ask the model for a program against typed stubs, check it
(``code.check``), then run it in Monty through ``code.start`` / ``code.resume``.
Every call the program makes is its own activity (``tools.call`` or
``llm.call``), keyed by run id + program call id, and calls that pause
together run concurrently. The interpreter never runs here, and between
segments the program is only a signed snapshot reference in history.

Violations (no program, syntax or type errors, a failed program, a value that
breaks the output schema) go down the same ladder as the tool loop.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        AgentInput,
        AgentResult,
        AgentSpec,
        LLMRequest,
        LLMResponse,
        Message,
        ResponseFormat,
        ToolCallInput,
        ToolCallRecord,
        ToolCallResult,
        ToolSchema,
        Violation,
        ViolationKind,
    )
    from ..contracts.code.program import (
        LLM_FUNCTION,
        CallOutcome,
        CheckProgramInput,
        CheckProgramResult,
        PendingCall,
        ProgramFunction,
        ProgramLimits,
        ProgramStatus,
        ResumeProgramInput,
        StartProgramInput,
        capped_view,
    )
    from ..contracts.code.stubs import extract_program, generate_stubs, program_functions
    from ..contracts.json_schema import instance_violations
    from ..contracts.spec import ActivityPolicy
    from .activity_options import activity_options
    from .degradation import ModelLadder

if TYPE_CHECKING:
    from .agent import AgentWorkflow

CONTRACT = "code.program"
_RECORD_CHARS = 1000

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


async def run_code_mode(wf: AgentWorkflow, inp: AgentInput, tools: list[ToolSchema]) -> AgentResult:
    spec = inp.spec
    result = wf.result
    ladder = ModelLadder(spec)
    limits = spec.code_limits
    stubs = generate_stubs(tools)
    functions = program_functions(tools)
    system = f"{spec.system_prompt}\n\n{PROGRAM_INSTRUCTIONS.format(stubs=stubs)}"
    history = [Message.system(system), Message.user(inp.input)]
    accepted = len(history)

    for index in range(spec.max_steps):
        if wf.cancel_requested:
            result.status = "cancelled"
            return result
        started = workflow.now()
        request = LLMRequest(
            config=ladder.current, messages=history, allowed_model_aliases=spec.allowed_model_aliases
        )
        response = await wf.call_llm(spec, request)
        violations = list(response.violations)
        program = None if violations else extract_program(response.message.content)
        if not violations and program is None:
            violations = [_violation(ViolationKind.program_syntax, "$.content", "the answer has no ```python block")]
        if program is not None and not violations:
            violations = await _check(program, stubs, limits)

        records: list[ToolCallRecord] = []
        value: Any = None
        status = ProgramStatus(state="failed")
        if program is not None and not violations:
            status, records = await _execute(wf, spec, index, program, functions, limits, ladder)
            if status.state == "completed":
                value = status.value
                if spec.output_schema is not None:
                    violations = instance_violations(
                        value, spec.output_schema, contract=CONTRACT, phase="post",
                        kind=ViolationKind.response_schema_mismatch, path="$", what="the program's value",
                    )
            else:
                assert status.error is not None
                shown = status.output + (f"\n[{status.output_dropped} more characters]" if status.output_dropped else "")
                violations = [
                    _violation(
                        ViolationKind.program_failed, "$.program",
                        f"[{status.error.kind}] {status.error.message}" + (f"\nPrinted output:\n{shown}" if shown else ""),
                    )
                ]

        if violations:
            checked = response.model_copy(update={"violations": violations})
            wf.record_step(index, "assistant", checked, records, started)
            next_history = wf.after_violation(spec, index, ladder, checked, history, accepted)
            if next_history is None:
                return result
            history = next_history
            continue

        final = response.model_copy(
            update={"message": Message(role="assistant", content=capped_view(value, status.output, status.output_dropped))}
        )
        wf.record_step(index, "final", final, records, started)
        result.status = "completed"
        result.model = response.model or ladder.current.model
        result.output = value
        return result

    raise ApplicationError(
        f"the run used all {spec.max_steps} steps without a finished program",
        type="BudgetExceededError",
        non_retryable=True,
    )


def _segment_policy(limits: ProgramLimits) -> ActivityPolicy:
    # A segment is bounded by the interpreter's own limit; the margin covers
    # loading and storing a snapshot of several MB.
    return ActivityPolicy(start_to_close_seconds=limits.segment_seconds + 60.0, max_attempts=5)


def _segment_options(limits: ProgramLimits) -> dict[str, Any]:
    # code.start / code.resume run as LOCAL activities: a sequential tool call
    # then costs one server round trip (tools.call), not two, since the segment
    # runs inside the workflow task and leaves a marker. This is safe because a
    # segment is short (the sandbox enforces segment_seconds), deterministic
    # from its snapshot, and free of side effects (those are tools.call, keyed).
    # A killed worker's segment is rerun from the same snapshot after the
    # workflow task timeout (10 s default), which replaces the heartbeat timeout;
    # a hung one is cut by start_to_close and retried in-process (backoffs stay
    # under local_retry_threshold). Inputs and results over 256 KiB still go
    # through ExternalStorage: the activity worker encodes the result and the
    # workflow completion encodes the input, as for any activity.
    return {**activity_options(_segment_policy(limits)), "local_retry_threshold": timedelta(minutes=1)}


async def _check(program: str, stubs: str, limits: ProgramLimits) -> list[Violation]:
    checked = await workflow.execute_activity(
        "code.check",
        CheckProgramInput(program=program, stubs=stubs),
        result_type=CheckProgramResult,
        summary="check program",
        heartbeat_timeout=timedelta(seconds=5),
        **activity_options(_segment_policy(limits)),
    )
    return checked.violations


async def _execute(
    wf: AgentWorkflow,
    spec: AgentSpec,
    index: int,
    program: str,
    functions: list[ProgramFunction],
    limits: ProgramLimits,
    ladder: ModelLadder,
) -> tuple[ProgramStatus, list[ToolCallRecord]]:
    info = workflow.info()
    by_name = {f.python_name: f for f in functions}
    records: dict[int, ToolCallRecord] = {}
    start = StartProgramInput(
        run_key=f"{info.workflow_id}/{info.run_id}/{index}", program=program, functions=functions, limits=limits,
        now=workflow.now().isoformat(), seed=workflow.random().randint(0, 2**62),
    )
    status = await drive_program(
        start,
        lambda call: _run_call(wf, spec, index, info.run_id, call, by_name[call.function], ladder, records),
    )
    return status, [records[k] for k in sorted(records)]


async def drive_program(
    start: StartProgramInput,
    run_call: Callable[[PendingCall], Awaitable[CallOutcome]],
    *,
    summary: str | None = None,
) -> ProgramStatus:
    """Run a program in the sandbox to its end; every call it makes goes to ``run_call``.

    Calls that pause together run concurrently; the program resumes with their
    outcomes. Shared by code mode and the monitor's fixed scan program.
    """
    options = _segment_options(start.limits)
    calls: dict[int, asyncio.Task[CallOutcome]] = {}

    def launch(new: list[PendingCall]) -> None:
        for call in new:
            if call.call_id not in calls:
                calls[call.call_id] = asyncio.ensure_future(run_call(call))

    status = await _sandbox("code.start", start, options, summary)
    while status.state == "pending":
        launch(status.calls)
        outcomes = list(await asyncio.gather(*(calls[i] for i in status.awaiting)))
        assert status.snapshot is not None
        status = await _sandbox(
            "code.resume",
            ResumeProgramInput(
                run_key=start.run_key, snapshot=status.snapshot, functions=start.functions, outcomes=outcomes,
                limits=start.limits, output=status.output, output_dropped=status.output_dropped,
                calls_made=status.calls_made, sandbox_seconds=status.sandbox_seconds,
            ),
            options,
            summary,
        )
    # Calls the program started but never awaited still ran; wait so every
    # side effect is recorded before the run reports.
    if status.state == "completed":
        launch(status.calls)
    if calls:
        await asyncio.gather(*calls.values())
    return status


async def _sandbox(name: str, arg: Any, options: dict[str, Any], summary: str | None) -> ProgramStatus:
    try:
        return await workflow.execute_local_activity(
            name, arg, result_type=ProgramStatus, summary=summary or name, **options
        )
    except ActivityError as exc:
        cause = exc.cause
        if isinstance(cause, ApplicationError) and cause.type == "SnapshotIntegrityError":
            raise ApplicationError(cause.message, type="SnapshotIntegrityError", non_retryable=True) from exc
        raise


async def _run_call(
    wf: AgentWorkflow,
    spec: AgentSpec,
    index: int,
    run_id: str,
    call: PendingCall,
    function: ProgramFunction,
    ladder: ModelLadder,
    records: dict[int, ToolCallRecord],
) -> CallOutcome:
    call_id = f"p{index}-{call.call_id}"
    if function.tool == LLM_FUNCTION:
        outcome = await _run_llm(wf, spec, call, ladder)
        content = json.dumps(outcome.value) if outcome.error is None else outcome.error
    else:
        result: ToolCallResult = await workflow.execute_activity(
            "tools.call",
            ToolCallInput(
                name=function.tool,
                arguments=call.arguments,
                call_id=call_id,
                # Stable across retries, crashes and replays: a side effect runs once.
                idempotency_key=f"{run_id}:{call_id}",
            ),
            result_type=ToolCallResult,
            summary=f"execute_tool {function.tool}",
            **activity_options(spec.tool_policy),
        )
        outcome = _outcome(call.call_id, result)
        content = result.content
    records[call.call_id] = ToolCallRecord(
        call_id=call_id,
        name=function.tool,
        arguments=call.arguments[:_RECORD_CHARS],
        content=content[:_RECORD_CHARS] + (" [truncated]" if len(content) > _RECORD_CHARS else ""),
        is_error=outcome.error is not None,
    )
    return outcome


def _outcome(call_id: int, result: ToolCallResult) -> CallOutcome:
    if result.is_error:
        return CallOutcome(call_id=call_id, error=result.content)
    if result.structured is not None:
        return CallOutcome(call_id=call_id, value=result.structured)
    try:
        return CallOutcome(call_id=call_id, value=json.loads(result.content))
    except json.JSONDecodeError:
        return CallOutcome(call_id=call_id, value=result.content)


async def _run_llm(wf: AgentWorkflow, spec: AgentSpec, call: PendingCall, ladder: ModelLadder) -> CallOutcome:
    args = json.loads(call.arguments)
    prompt, schema = args.get("prompt"), args.get("schema")
    if not isinstance(prompt, str) or (schema is not None and not isinstance(schema, dict)):
        return CallOutcome(call_id=call.call_id, error="llm(prompt: str, schema: dict | None)")
    request = LLMRequest(
        config=ladder.current,
        messages=[Message.user(prompt)],
        response_format=ResponseFormat(json_schema=schema) if schema else None,
        allowed_model_aliases=spec.allowed_model_aliases,
    )
    # Same contracts and the same token budget as every other model call.
    response: LLMResponse = await wf.call_llm(spec, request)
    if response.violations:
        return CallOutcome(call_id=call.call_id, error="; ".join(v.for_model() for v in response.violations))
    content = response.message.content or ""
    return CallOutcome(call_id=call.call_id, value=json.loads(content) if schema else content)


def _violation(kind: ViolationKind, path: str, message: str) -> Violation:
    return Violation(contract=CONTRACT, phase="post", kind=kind, path=path, message=message)


__all__ = ["PROGRAM_INSTRUCTIONS", "run_code_mode"]
