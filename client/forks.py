"""Forking a recorded run: a new run from another's conversation before step N, its effects never repeated.

The source's steps (from its result in history, or the steps query while it
is open) rebuild the conversation the model had before step ``at_step``;
every side effect the source made goes with the fork (``ForkOrigin.effects``),
so the fork's model is told of them and an identical call is answered from the
record. The source run is only read. In code mode a step is also each call a
program made (``fork_points``): a fork there resumes the source's program from
its snapshot, which the worker checks against the source and signs for the fork
(``code.fork``), so the fork has the program's memory as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.converter import DataConverter

from ..contracts import AgentInput, AgentResult, AgentSpec, EffectRecord, ForkOrigin, InvalidSpecError, Message, Step
from ..contracts.code.program import ForkedProgram
from ..contracts.llm.arguments import cap
from ..contracts.llm.messages import LLMToolCall
from ..contracts.llm.tools import OUTCOME_UNKNOWN
from ..contracts.names import AGENT_WORKFLOW, STEPS_QUERY
from ..contracts.persisted_ids import RUN_SCOPE, fork_run_id, history_effect_key, program_call_id
from ..contracts.violations import Violation, ViolationKind
from .counterfactual import RecordedRun, new_spec, read_recorded_run
from .fork_points import ForkPoint, code_points, program_segments
from .replay_check import fetch_history
from .search_attributes import run_start_attributes


def _bad(path: str, message: str) -> InvalidSpecError:
    return InvalidSpecError(
        [Violation(contract="fork", phase="pre", kind=ViolationKind.invalid_config, path=path, message=message)]
    )


def effects_in_history(source: RecordedRun) -> list[EffectRecord]:
    """The effects of a run that has no result (open, failed, cancelled, terminated): every side-effecting
    call its history shows answered, as its ledger would have recorded it (a tool's own refusal is none)."""
    effectful = {s.name for s in source.schemas if s.side_effects}
    records = []
    for index, (tool, arguments, answer) in enumerate(source.calls):
        unknown = answer.error_type == OUTCOME_UNKNOWN
        if tool in effectful and (unknown or not answer.is_error):
            records.append(
                EffectRecord(
                    key=history_effect_key(index),
                    tool=tool,
                    arguments=cap(arguments),
                    content=cap(answer.content),
                    outcome="unknown" if unknown else "done",
                )
            )
    return records


def conversation_before(user_input: str, steps: Sequence[Step], at_step: int) -> list[Message]:
    """The messages after the system prompt that the model had before step ``at_step``."""
    messages = [Message.user(user_input)]
    for step in steps[:at_step]:
        if step.kind != "tool_call" or not step.tool_calls:
            continue  # an assistant text or a violated answer the ladder replaced: not in the conversation
        messages.append(
            Message(
                role="assistant",
                content=step.content,
                tool_calls=tuple(
                    LLMToolCall(id=c.call_id, name=c.name, arguments=c.arguments) for c in step.tool_calls
                ),
            )
        )
        messages += [
            Message(role="tool", content=c.content, tool_call_id=c.call_id, name=c.name, is_error=c.is_error)
            for c in step.tool_calls
        ]
    return messages


@dataclass(frozen=True)
class ForkPlan:
    """What a fork starts from: its input, and where in the source that is."""

    source: str
    at_step: int
    inp: AgentInput
    where: str
    """Readable: "before model step 3", or in code mode "inside model step 0's program, before its call p0-4"."""
    at_call: str | None = None
    """Code mode, inside a program: the source's call the fork starts before (as its step records name it)."""


async def plan_fork(
    client: Client,
    workflow_id: str,
    at_step: int,
    *,
    data_converter: DataConverter,
    spec: AgentSpec | None = None,
    model: str | None = None,
    user_input: str | None = None,
) -> ForkPlan:
    """The fork of ``workflow_id`` at ``at_step`` (0: from the user input), read from its history; nothing starts."""
    history = await fetch_history(client, workflow_id)
    source = await read_recorded_run(history, data_converter)
    result = source.result
    if result is None:  # still open: the steps so far (effects are then those in its steps)
        steps = await client.get_workflow_handle(workflow_id).query(STEPS_QUERY, 0, result_type=list[Step])
        result = AgentResult(status="running", steps=steps)
    new = new_spec(source.inp.spec, spec, model)
    code = source.inp.spec.mode == "code"
    if new.mode != source.inp.spec.mode:
        raise _bad("--spec", f"run {workflow_id} is a {source.inp.spec.mode}-mode run; its fork runs in the same mode")
    if code:
        try:
            points = code_points(result.steps, await program_segments(history, data_converter))
        except ValueError as exc:
            raise _bad("workflow_id", f"run {workflow_id} cannot be forked in code mode: {exc}") from None
    else:
        points = [ForkPoint(i) for i in range(len(result.steps) + 1)]
    if at_step < 0 or at_step >= len(points):
        what = " (code mode: model calls and program calls)" if code else ""
        raise _bad(
            "--at-step",
            f"run {workflow_id} has steps 0..{len(points) - 2}{what}; --at-step must be 0..{len(points) - 1}",
        )
    point = points[at_step]
    messages = conversation_before(source.inp.input, result.steps, point.step)
    program = None
    if point.paused is not None:
        assert point.call_id is not None
        program = _forked_program(history, result.steps[point.step], point)
        if user_input is not None:
            raise _bad(
                "--input", f"step {at_step} is {point.describe()}: a new message can only start a fork at a model step"
            )
        if sorted(new.tools) != sorted(source.inp.spec.tools):
            raise _bad(
                "--spec",
                f"step {at_step} is {point.describe()}: the program was written against the source's "
                f"tools ({', '.join(source.inp.spec.tools) or 'none'}); fork at a model step to change them",
            )
    elif user_input is not None:
        if point.step == 0:
            messages = [Message.user(user_input)]
        elif messages[-1].role == "user":  # code mode: the conversation before a model step is the input
            messages = [*messages[:-1], Message.user(f"{messages[-1].content or ''}\n\n{user_input}")]
        else:
            messages = [*messages, Message.user(user_input)]
    # A fork of a fork: the world also keeps what the first source did, which the middle run only inherited.
    inherited = source.inp.fork.effects if source.inp.fork is not None else []
    made = result.effects if source.result is not None else effects_in_history(source)
    effects = list({e.key: e for e in [*inherited, *made]}.values())
    origin = ForkOrigin(workflow_id=workflow_id, at_step=at_step, messages=messages, effects=effects, program=program)
    return ForkPlan(
        source=workflow_id,
        at_step=at_step,
        inp=AgentInput(spec=new, input=source.inp.input, fork=origin, tenant=source.inp.tenant),
        where=point.describe(),
        at_call=None if point.call_id is None else program_call_id(RUN_SCOPE, point.step, point.call_id),
    )


def _forked_program(history: WorkflowHistory, step: Step, point: ForkPoint) -> ForkedProgram:
    assert point.paused is not None and point.call_id is not None and step.program is not None
    started = history.events[0].workflow_execution_started_event_attributes
    return ForkedProgram(
        step=step.index,
        call_id=point.call_id,
        chain_run_id=started.first_execution_run_id,
        content=step.content or "",
        model=step.model,
        program=step.program,
        paused=point.paused,
    )


async def start_fork(
    client: Client, plan: ForkPlan, *, task_queue: str, fork_id: str | None = None
) -> WorkflowHandle[object, AgentResult]:
    return await client.start_workflow(
        AGENT_WORKFLOW,
        plan.inp,
        id=fork_id or fork_run_id(plan.source, plan.at_step, uuid.uuid4().hex[:8]),
        task_queue=task_queue,
        search_attributes=run_start_attributes(plan.inp.spec, plan.inp.tenant),
        result_type=AgentResult,
    )


async def fork_run(
    client: Client,
    workflow_id: str,
    at_step: int,
    *,
    data_converter: DataConverter,
    task_queue: str,
    spec: AgentSpec | None = None,
    model: str | None = None,
    user_input: str | None = None,
    fork_id: str | None = None,
) -> WorkflowHandle[object, AgentResult]:
    """Start the fork of ``workflow_id`` at ``at_step`` (0: from the user input) and return its handle.

    In code mode a step is a model call or a call a program made (``fork_points``); a fork inside a
    program resumes it from the source's snapshot, which the worker re-binds to the fork."""
    plan = await plan_fork(
        client, workflow_id, at_step, data_converter=data_converter, spec=spec, model=model, user_input=user_input
    )
    return await start_fork(client, plan, task_queue=task_queue, fork_id=fork_id)
