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
from ..contracts.names import AGENT_WORKFLOW, SESSION_WORKFLOW, STEPS_QUERY
from ..contracts.persisted_ids import RUN_SCOPE, fork_run_id, history_effect_key, program_call_id
from ..contracts.violations import Violation, ViolationKind
from .counterfactual import RecordedRun, new_spec, read_recorded_run
from .fork_points import ForkPoint, code_points, program_segments
from .replay_check import fetch_history, workflow_type
from .runs import validate_spec
from .search_attributes import run_start_attributes
from .unsettled_calls import unknown_effects, unsettled_calls, wait_to_settle, with_side_effects

SETTLE_SECONDS = 10.0
"""How long a fork of a running source waits for a call with side effects the source is making to settle."""

FORK_NEXT_STEP = "check the id (a fork reads the source from the server, which keeps a closed run only so long)"


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


def conversation_before(opening: str | Sequence[Message], steps: Sequence[Step], at_step: int) -> list[Message]:
    """The messages after the system prompt that the model had before step ``at_step``.

    ``opening`` is what the run's model had before its first step: the user input, or in a fork the
    conversation it inherited (its ``ForkOrigin.messages``), so that forks compose."""
    messages = [Message.user(opening)] if isinstance(opening, str) else list(opening)
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
    unknown: tuple[str, ...] = ()
    """Calls with side effects the source was still making (unsettled after the wait): ``tool(arguments)``.
    The fork knows each as an effect whose outcome is unknown and never makes it again."""


async def plan_fork(
    client: Client,
    workflow_id: str,
    at_step: int,
    *,
    data_converter: DataConverter,
    spec: AgentSpec | None = None,
    model: str | None = None,
    user_input: str | None = None,
    settle_seconds: float = SETTLE_SECONDS,
) -> ForkPlan:
    """The fork of ``workflow_id`` at ``at_step`` (0: from the user input), read from its history; nothing starts.

    A source still open may be inside a call with side effects: the fork waits up to ``settle_seconds``
    for it to settle, then knows it as an effect whose outcome is unknown (``unsettled_calls``)."""
    history = await fetch_history(client, workflow_id, next_step=FORK_NEXT_STEP)
    kind = workflow_type(history)
    if kind == SESSION_WORKFLOW:
        raise _bad(
            "--turn",
            f"{workflow_id} is a session: fork one of its turns (agentsteps fork {workflow_id} --turn T --at-step N)",
        )
    if kind != AGENT_WORKFLOW:
        raise _bad("workflow_id", f"{workflow_id} is a {kind}; only an {AGENT_WORKFLOW} run or a session forks")
    source = await read_recorded_run(history, data_converter)
    result = source.result
    unknown: list[EffectRecord] = []
    if result is None:  # still open (or ended without a result): its steps so far, and its effects in history
        pending = with_side_effects(await unsettled_calls(history, data_converter), source.schemas)
        if pending:
            history = await wait_to_settle(
                client, workflow_id, history, pending, converter=data_converter, wait=settle_seconds
            )
        steps = await client.get_workflow_handle(workflow_id).query(STEPS_QUERY, 0, result_type=list[Step])
        # Read after the steps, so that every call they show is in it (its effect included).
        history = await fetch_history(client, workflow_id)
        source = await read_recorded_run(history, data_converter)
        result = source.result or AgentResult(status="running", steps=steps)
        if source.result is None:
            still = with_side_effects(await unsettled_calls(history, data_converter), source.schemas)
            unknown = unknown_effects(still, workflow_id)
    new = new_spec(source.inp.spec, spec, model)
    validate_spec(new)  # a model or spec the fork cannot run is refused here, before anything starts
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
    # A fork's model started from the conversation it inherited, not from the user input alone.
    opening = source.inp.fork.messages if source.inp.fork is not None else source.inp.input
    messages = conversation_before(opening, result.steps, point.step)
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
        if point.step == 0 and len(messages) == 1:  # before anything but the input: it is replaced
            messages = [Message.user(user_input)]
        elif messages[-1].role == "user":  # code mode: the conversation before a model step is the input
            messages = [*messages[:-1], Message.user(f"{messages[-1].content or ''}\n\n{user_input}")]
        else:
            messages = [*messages, Message.user(user_input)]
    # A fork of a fork: the world also keeps what the first source did, which the middle run only inherited.
    inherited = source.inp.fork.effects if source.inp.fork is not None else []
    made = result.effects if source.result is not None else [*effects_in_history(source), *unknown]
    effects = list({e.key: e for e in [*inherited, *made]}.values())
    origin = ForkOrigin(workflow_id=workflow_id, at_step=at_step, messages=messages, effects=effects, program=program)
    return ForkPlan(
        source=workflow_id,
        at_step=at_step,
        inp=AgentInput(spec=new, input=source.inp.input, fork=origin, tenant=source.inp.tenant),
        where=point.describe(),
        at_call=None if point.call_id is None else program_call_id(RUN_SCOPE, point.step, point.call_id),
        unknown=tuple(f"{e.tool}({e.arguments})" for e in unknown),
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
    settle_seconds: float = SETTLE_SECONDS,
) -> WorkflowHandle[object, AgentResult]:
    """Start the fork of ``workflow_id`` at ``at_step`` (0: from the user input) and return its handle.

    In code mode a step is a model call or a call a program made (``fork_points``); a fork inside a
    program resumes it from the source's snapshot, which the worker re-binds to the fork."""
    plan = await plan_fork(
        client,
        workflow_id,
        at_step,
        data_converter=data_converter,
        spec=spec,
        model=model,
        user_input=user_input,
        settle_seconds=settle_seconds,
    )
    return await start_fork(client, plan, task_queue=task_queue, fork_id=fork_id)
