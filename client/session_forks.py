"""Forking a session turn: a new session from another's state before step N of turn T.

What a user of a session expects of a fork is a session: the forked turn goes
on from step N (the new session's first turn, numbered T), and then it takes
turns like any other, with the conversation and, in code mode, the REPL
memory the source had at that point. The source is only read (two queries and
its history), and keeps working.

Where the state comes from:

- the conversation and REPL memory before turn T are the source's checkpoint
  of the turn before it (``fork_source`` query: a session keeps one per turn,
  the last ``turns_kept``); every program of a turn starts from the REPL as the
  turn found it, so that is the memory at any step of it;
- the turn's input and its steps before N are read from the source's history
  (the ``turn`` Update's request and result), following continue-as-new back;
- the stored conversation and REPL dump stay the source's until the fork's
  first activity (``session.fork``) has the worker check them against the
  source and bind them to the fork;
- every effect the source made that it still records (its kept turns, undone
  turns, failed turns', what it inherited) goes with the fork: the fork's model
  is told, and an identical call is answered from the record;
- the source's tenant goes with the fork (it bills where the source does, under
  its worker's quota config), and its start sets the console's search attributes, as
  ``start_agent_run`` does, so the fork upserts none at its start.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode

from ..contracts import AgentSpec, EffectRecord, InvalidSpecError, Message, Violation, ViolationKind
from ..contracts.errors import InvalidTurnError, SessionClosedError, SessionNotFoundError
from ..contracts.names import FORK_SOURCE_QUERY, SESSION_WORKFLOW, TURN_UPDATE
from ..contracts.persisted_ids import fork_session_id
from ..contracts.session import (
    ForkSource,
    SessionFork,
    SessionInput,
    SessionOutcome,
    TurnCheckpoint,
    TurnInput,
    TurnResult,
)
from ..failures.unwrap import typed_cause
from .counterfactual import new_spec
from .forks import SETTLE_SECONDS, conversation_before
from .replay_check import fetch_history
from .runs import validate_spec
from .search_attributes import run_start_attributes
from .sessions import closed_message
from .unsettled_calls import running_effects


@dataclass(frozen=True)
class RecordedTurn:
    """One completed turn as the source's history recorded it: what was asked and its result."""

    input: str
    result: TurnResult
    before: list[Message]
    """Messages the turn had before its first step, after its user message: a fork session's first turn
    went on from its own source's steps (``SessionFork.turn_messages``), which its steps do not repeat."""


@dataclass(frozen=True)
class SessionForkPlan:
    source: str
    turn: int
    at_step: int
    fork_id: str
    inp: SessionInput
    turn_input: str
    where: str


async def _source_spec_and_turn(
    client: Client, session_id: str, turn: int, converter: DataConverter
) -> tuple[SessionInput, RecordedTurn | None]:
    """The session's input (its current run's) and turn ``turn`` as recorded, searching back along its
    continue-as-new chain."""
    run_id: str | None = None
    current: SessionInput | None = None
    while True:
        history = await fetch_history(client, session_id, run_id)
        started = history.events[0].workflow_execution_started_event_attributes
        this_run = (await converter.decode(list(started.input.payloads), [SessionInput]))[0]
        current = current or this_run
        inputs: dict[str, Any] = {}
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                request = event.workflow_execution_update_accepted_event_attributes.accepted_request
                if request.input.name == TURN_UPDATE:
                    inputs[request.meta.update_id] = (await converter.decode(list(request.input.args.payloads), [Any]))[
                        0
                    ]
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
                done = event.workflow_execution_update_completed_event_attributes
                if done.meta.update_id not in inputs or not done.outcome.HasField("success"):
                    continue
                result = (await converter.decode(list(done.outcome.success.payloads), [TurnResult]))[0]
                if result.turn == turn:
                    raw = inputs[done.meta.update_id]
                    text = raw.get("input", "") if isinstance(raw, dict) else str(getattr(raw, "input", ""))
                    origin = this_run.fork if not started.continued_execution_run_id else None
                    before = origin.turn_messages if origin is not None and origin.turn == turn else []
                    return current, RecordedTurn(input=text, result=result, before=list(before))
        if not started.continued_execution_run_id:
            return current, None
        run_id = started.continued_execution_run_id


def _state_before(source: ForkSource, turn: int, rewound_to_zero: set[int]) -> TurnCheckpoint:
    """The checkpoint the turn started from: the one before it still in effect, or a fresh start."""
    turns = [c.turn for c in source.checkpoints]
    index = turns.index(turn)
    if index > 0:
        return source.checkpoints[index - 1]
    if turn == 1 or turn in rewound_to_zero:
        return TurnCheckpoint(turn=0)
    raise InvalidTurnError(f"turn {turn} started from a state older than the turns this session keeps (turns_kept)")


async def plan_session_fork(
    client: Client,
    session_id: str,
    turn: int,
    at_step: int,
    *,
    data_converter: DataConverter,
    spec: AgentSpec | None = None,
    model: str | None = None,
    user_input: str | None = None,
    fork_id: str | None = None,
    settle_seconds: float = SETTLE_SECONDS,
) -> SessionForkPlan:
    """The fork of session ``session_id`` before step ``at_step`` of turn ``turn``; nothing starts."""
    handle = client.get_workflow_handle(session_id)
    try:
        described = await handle.describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise SessionNotFoundError(session_id) from None
        raise
    status = described.status
    if described.workflow_type != SESSION_WORKFLOW:
        not_a_session = Violation(
            contract="fork",
            phase="pre",
            kind=ViolationKind.invalid_config,
            path="--turn",
            message=f"{session_id} is an {described.workflow_type} run, not a session: fork it without --turn "
            f"(agentsteps fork {session_id} --at-step N)",
        )
        raise InvalidSpecError([not_a_session])
    if status is not WorkflowExecutionStatus.RUNNING:
        # Its stored state is collected once nothing open reaches it: a fork is taken while it is open.
        raise SessionClosedError(await closed_message(client, session_id))
    source: ForkSource = await handle.query(FORK_SOURCE_QUERY, result_type=ForkSource)
    forkable = [c.turn for c in source.checkpoints if c.turn > 0]
    if turn not in forkable:
        kept = ", ".join(map(str, forkable)) or "none yet"
        raise InvalidTurnError(
            f"session {session_id} has no turn {turn} to fork; the turns it keeps are: {kept} "
            "(undone turns and turns older than turns_kept are gone)"
        )
    inp, recorded = await _source_spec_and_turn(client, session_id, turn, data_converter)
    if recorded is None:
        raise InvalidTurnError(
            f"turn {turn} of session {session_id} did not complete: only a completed turn's steps are recorded"
        )
    # The first turn after a rewind to 0 started fresh, like turn 1.
    rewound_to_zero = {max(u.turn for u in r.undone) + 1 for r in source.rewinds if r.to_turn == 0 and r.undone}
    steps = recorded.result.steps
    if at_step < 0 or at_step > len(steps):
        raise InvalidTurnError(
            f"turn {turn} of session {session_id} has steps 0..{len(steps) - 1}; --at-step must be 0..{len(steps)}"
        )
    before = _state_before(source, turn, rewound_to_zero)
    turn_input = recorded.input
    turn_messages = [*recorded.before, *conversation_before(turn_input, steps, at_step)[1:]]
    if user_input is not None:
        if at_step == 0:
            turn_input = user_input
        else:
            turn_messages.append(Message.user(user_input))
    new = new_spec(inp.spec, spec, model)
    validate_spec(new)  # a model or spec the fork cannot run is refused here, before anything starts
    if new.mode != inp.spec.mode:
        raise InvalidTurnError(
            f"session {session_id} is a {inp.spec.mode}-mode session; its fork runs in the same mode"
        )
    # A turn may be running: what it did so far is in no checkpoint yet, and a call it is making is unknown.
    running = await running_effects(client, session_id, converter=data_converter, wait=settle_seconds)
    effects = list({e.key: e for e in [*_effects(source), *running]}.values())
    fork = SessionFork(
        session_id=session_id,
        owner=source.owner,
        turn=turn,
        at_step=at_step,
        conversation=before.conversation,
        messages=before.messages,
        repl=before.repl,
        turn_messages=turn_messages,
        effects=effects,
    )
    return SessionForkPlan(
        source=session_id,
        turn=turn,
        at_step=at_step,
        fork_id=fork_id or fork_session_id(session_id, turn, at_step, uuid.uuid4().hex[:8]),
        inp=SessionInput(spec=new, session=inp.session, key_scope=inp.key_scope, tenant=inp.tenant, fork=fork),
        turn_input=turn_input,
        where=f"before step {at_step} of turn {turn}",
    )


def _effects(source: ForkSource) -> list[EffectRecord]:
    """Every effect the source still records, once by key: its kept turns', undone turns', failed turns'
    and what it inherited itself."""
    made = [e for c in source.checkpoints for e in c.effects]
    untold = [e for u in source.untold_effects for e in u.effects]
    return list({e.key: e for e in [*source.undone_effects, *made, *untold]}.values())


async def start_session_fork(client: Client, plan: SessionForkPlan, *, task_queue: str) -> TurnResult:
    """Start the fork session and run its first turn (the forked one, from the planned step); its result."""
    start: WithStartWorkflowOperation[object, SessionOutcome] = WithStartWorkflowOperation(
        SESSION_WORKFLOW,
        plan.inp,
        id=plan.fork_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        search_attributes=run_start_attributes(plan.inp.spec, plan.inp.tenant),
        result_type=SessionOutcome,
    )
    try:
        result: TurnResult = await client.execute_update_with_start_workflow(
            TURN_UPDATE, TurnInput(input=plan.turn_input), start_workflow_operation=start, result_type=TurnResult
        )
    except WorkflowUpdateFailedError as exc:
        error = typed_cause(exc)  # the typed error behind the failed turn (an activity's, or the turn's own)
        if error is not None:
            raise error from exc
        raise
    return result


async def fork_session(
    client: Client,
    session_id: str,
    turn: int,
    at_step: int,
    *,
    data_converter: DataConverter,
    task_queue: str,
    spec: AgentSpec | None = None,
    model: str | None = None,
    user_input: str | None = None,
    fork_id: str | None = None,
    settle_seconds: float = SETTLE_SECONDS,
) -> tuple[str, TurnResult]:
    """Fork session ``session_id`` before step ``at_step`` of turn ``turn``: a new session (its id is
    returned) whose first turn goes on from there; send it more turns as to any session."""
    plan = await plan_session_fork(
        client,
        session_id,
        turn,
        at_step,
        data_converter=data_converter,
        spec=spec,
        model=model,
        user_input=user_input,
        fork_id=fork_id,
        settle_seconds=settle_seconds,
    )
    return plan.fork_id, await start_session_fork(client, plan, task_queue=task_queue)


__all__ = ["SessionForkPlan", "fork_session", "plan_session_fork", "start_session_fork"]
