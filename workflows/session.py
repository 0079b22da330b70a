"""SessionWorkflow: one long-lived conversation, a turn per ``turn`` Update.

Each turn runs the one step engine (``steps.run_steps``) from the
conversation so far, on its own ``AgentRun`` (budgets are per turn). Between
turns the session is a workflow waiting on a condition: it holds no worker
slot and no sandbox process, and any worker can pick it up, days later.

Turns are serial: a turn that arrives while another is running is rejected by
the validator (``SessionBusyError``) before it reaches history, never queued,
so a caller always knows which answer belongs to which question. A turn that
fails (budget, contract, cancel) leaves the conversation as it was before it.
The session ends on the ``close`` Update or after ``idle_timeout_seconds``
without a turn, and continues-as-new between turns (never inside one) when
Temporal suggests it or history passes the configured size.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import TypeAdapter
    from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

    from ..contracts import AgentSpec, AgentState, Message, Step, ToolSchema
    from ..contracts.code.program import ReplMemory
    from ..contracts.code.variables import variables_note
    from ..contracts.errors import CarriedStateError, InvalidTurnError, SessionBusyError, SessionClosedError
    from ..contracts.llm.tool_catalog import ToolCatalogRef
    from ..contracts.names import (
        CANCEL_SIGNAL,
        CLOSE_UPDATE,
        CURRENT_TURN_QUERY,
        FORK_SOURCE_QUERY,
        PROGRESS_TOPIC,
        REWIND_UPDATE,
        SESSION_FORK,
        SESSION_WORKFLOW,
        STATE_QUERY,
        STEPS_QUERY,
        TURN_UPDATE,
        TURNS_QUERY,
    )
    from ..contracts.session import (
        EFFECTS_KEPT_PER_TURN,
        UNTOLD_TURNS_KEPT,
        CloseInput,
        ForkSource,
        ProgressEvent,
        Rewind,
        RewindInput,
        SessionCarry,
        SessionFork,
        SessionForkBound,
        SessionForkInput,
        SessionInput,
        SessionOutcome,
        SessionState,
        SessionStatus,
        TurnCheckpoint,
        TurnResult,
        TurnSummary,
        UntoldEffects,
        carried_problem,
        parse_turn,
        preview,
        repl_keys,
        session_owner,
    )
    from ..failures import from_failure, to_application_error
    from ..telemetry import workflow_metrics
    from .activity_options import NON_RETRYABLE_ERRORS
    from .agent_run import AgentRun
    from .approvals import ApprovalDesk, ApprovalHandlers
    from .effects import untold_note
    from .quota_gate import QuotaDesk, QuotaHandlers
    from .releases.gates import Features, carries_decisions, takes_carried_tools
    from .run_state import RunProgress
    from .steps import check_key_scope, check_tenant, opening, run_steps, spec_tools
    from .visibility import Visibility

IDLE_TIMEOUT_REASON = "idle_timeout"
_EVENTS_KEPT = 500


@workflow.defn(name=SESSION_WORKFLOW)
class SessionWorkflow(ApprovalHandlers, QuotaHandlers):
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        now = workflow.now()
        info = workflow.info()
        self.inp = inp
        self.owner = session_owner(info.workflow_id, info.first_execution_run_id)
        problem = carried_problem(
            inp,
            workflow_id=info.workflow_id,
            first_run_id=info.first_execution_run_id,
            continued=info.continued_run_id is not None,
            cron=bool(info.cron_schedule),
            attempt=info.attempt,
        )
        self.refused = CarriedStateError(problem) if problem is not None else None
        """Set when the input carried state this session does not own: it loads none of it, every
        Update is refused with it, and the run fails with it."""
        carried, stream = (inp.carried, inp.stream) if self.refused is None else (None, None)
        self.carry = carried or SessionCarry(created_at=now, last_activity=now)
        self.tools: list[ToolSchema] | None = None
        self.tools_ref: ToolCatalogRef | None = None
        """``tools`` stored as a catalog bound to this session, named by every model call instead of the schemas;
        only ever set beside the ``tools`` it names (``_use_tools``)."""
        self.tools_decided = False
        """Set by ``run`` once it knows where this run's tools come from; a turn waits for it."""
        self.current: RunProgress | None = None
        """The running turn's progress (queries and cancel read it); None between turns."""
        self.current_turn: int | None = None
        self.closed_reason: str | None = None
        self.approvals = ApprovalDesk()
        self.quotas = QuotaDesk()
        self.approvals.remember(self.carry.decided)
        self.approvals.on_request = lambda pending: self._publish(
            ProgressEvent(
                kind="approval_requested",
                turn=self.current_turn or 0,
                at=workflow.now(),
                tool=pending.tool,
                approval=pending,
            )
        )
        prior = TypeAdapter(WorkflowStreamState).validate_python(stream) if stream else None
        self.stream = WorkflowStream(prior)
        self.stream_base = prior.base_offset if prior else 0
        self.published = len(prior.log) if prior else 0
        self.activity = 0
        """Bumped at every turn's start and end: the idle timer starts over."""
        self.last_steps: list[Step] = []
        """The steps of the turn that ended last, for the ``steps`` query (memory only; never carried)."""
        self.visibility = Visibility()
        self.approvals.on_change = self.visibility.awaiting
        self.fork: SessionFork | None = inp.fork if self.refused is None and inp.carried is None else None
        """A new session forked from another's turn: its first turn goes on from the source's state there."""
        self.fork_failed: BaseException | None = None
        if self.fork is not None:
            # Turn numbers go on from the source's: the fork's first turn is the forked one.
            self.carry.turns_done = self.fork.turn - 1
            self.carry.undone_effects = list(self.fork.effects)
            self.carry.forked_from = self.fork.session_id

    @workflow.run
    async def run(self, inp: SessionInput) -> SessionOutcome:
        if self.refused is not None:
            raise to_application_error(self.refused)
        check_key_scope(inp.key_scope)
        check_tenant(inp.tenant)
        if inp.carried is None:
            workflow_metrics.record_session_started()
            self.visibility.start(inp.spec, inp.tenant)
        else:
            self.visibility.resume()
        if takes_carried_tools():
            # A continued run takes the schemas it carries; a new one (or one carried by an older release)
            # describes its tools at its next turn. Either way nothing here can fail: a continue-as-new
            # never ends a session, and a failed describe fails at most that turn.
            self._use_tools(self.carry.tools, self.carry.tools_ref)
        else:
            self._use_tools(await spec_tools(inp.spec))
        if self.fork is not None:
            # A new kind of input (no recorded run takes this branch): the source's state, bound to this session.
            await self._take_fork(self.fork)
        self.tools_decided = True
        idle = timedelta(seconds=inp.session.idle_timeout_seconds)
        while True:
            seen = self.activity
            try:
                await workflow.wait_condition(
                    lambda: self.closed_reason is not None or self.activity != seen, timeout=idle
                )
            except asyncio.TimeoutError:
                if self.current is None:
                    self.closed_reason = IDLE_TIMEOUT_REASON
            if self.closed_reason is not None:
                self.stream.detach_pollers()
                await workflow.wait_condition(lambda: self.current is None and workflow.all_handlers_finished())
                workflow_metrics.record_session_ended(
                    "idle_timeout" if self.closed_reason == IDLE_TIMEOUT_REASON else "closed"
                )
                return SessionOutcome(
                    session_id=workflow.info().workflow_id,
                    reason=self.closed_reason,
                    turns=self.carry.turns_done,
                    usage=self.carry.usage,
                )
            if self.current is None and self._history_is_long():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self.current is None and self.closed_reason is None:
                    self.carry.continued += 1
                    carry_decisions = carries_decisions()
                    workflow_metrics.record_session_continued()
                    await self.stream.continue_as_new(lambda state: [self._next_run(inp, state, carry_decisions)])

    def _next_run(self, inp: SessionInput, stream: Any, carry_decisions: bool) -> SessionInput:
        """The continued run's input, built at the last moment: after the stream's pollers are detached and
        every handler has finished, so a decision (or a turn) accepted while they finished is carried too."""
        if carry_decisions:
            self.carry.decided = self.approvals.recent()
        self.carry.chain = self.owner
        self.carry.tools, self.carry.tools_ref = self.tools, self.tools_ref
        return SessionInput(
            spec=inp.spec,
            session=inp.session,
            carried=self.carry,
            stream=stream,
            key_scope=inp.key_scope,
            tenant=inp.tenant,
            quota=inp.quota,
        )

    async def _take_fork(self, fork: SessionFork) -> None:
        """The source's conversation and REPL memory, checked against the source and bound to this session by
        the worker (``session.fork``); a failure closes this session and fails its first turn, typed."""
        info = workflow.info()
        try:
            bound = await workflow.execute_activity(
                SESSION_FORK,
                SessionForkInput(
                    source_session=fork.session_id,
                    source_owner=fork.owner,
                    owner=self.owner,
                    repl_key=repl_keys(info.workflow_id, info.first_execution_run_id)[0],
                    conversation=fork.conversation,
                    repl=fork.repl,
                ),
                result_type=SessionForkBound,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=5, non_retryable_error_types=NON_RETRYABLE_ERRORS),
            )
        except ActivityError as exc:
            error = from_failure(exc)
            self.fork_failed = to_application_error(error, *error.details) if error is not None else exc
            self.closed_reason = f"the fork of session {fork.session_id} could not take its state"
            return
        self.carry.conversation, self.carry.messages, self.carry.repl = bound.conversation, fork.messages, bound.repl
        # The state it starts from is a turn this session can rewind to (and be forked at) too.
        self.carry.checkpoints = [
            TurnCheckpoint(turn=fork.turn - 1, conversation=bound.conversation, messages=fork.messages, repl=bound.repl)
        ]

    # ------------------------------------------------------------------ turns

    @workflow.update(name=TURN_UPDATE)
    async def turn(self, raw: Any) -> TurnResult:
        inp = parse_turn(raw, self.inp.session.max_input_chars)  # the validator already accepted it
        forked: list[Message] = []
        if self.fork is not None:
            await workflow.wait_condition(lambda: self.tools_decided)
            if self.fork_failed is not None:
                raise self.fork_failed
            forked, self.fork = self.fork.turn_messages, None
        # Two turns accepted in the same workflow task both pass the validator.
        if self.current is not None:
            raise to_application_error(SessionBusyError("another turn is still running; send this one when it ends"))
        number = self.carry.turns_done + 1
        spec = self.inp.spec
        features = Features.at_start(one_shot=False)  # before the turn's first command, as every turn has
        info = workflow.info()
        own_repl = ReplMemory(key=repl_keys(info.workflow_id, info.first_execution_run_id)[0])
        repl = (self.carry.repl or own_repl) if spec.mode == "code" else None
        progress = RunProgress(repl=repl)
        self.current, self.current_turn = progress, number
        self.activity += 1
        summary = TurnSummary(turn=number, input=preview(inp.input), status="running", started_at=workflow.now())
        self._publish(ProgressEvent(kind="turn_started", turn=number, at=workflow.now(), detail=preview(inp.input)))
        dropped = False
        run: AgentRun | None = None
        try:
            await workflow.wait_condition(lambda: self.tools_decided)
            if self.tools is None:
                self._use_tools(await self._describe(spec))
            assert self.tools is not None, "described above"
            run = AgentRun.for_turn(
                spec,
                self.tools,
                features,
                turn=number,
                conversation=self.carry.conversation,
                approvals=self.approvals,
                progress=progress,
                on_event=self._publish,
                stream_tokens=self.inp.session.stream_tokens,
                key_scope=self.inp.key_scope,
                quota=self.inp.quota,
                quota_desk=self.quotas if self.inp.quota is not None else None,
                tools_ref=self.tools_ref,
            )
            started = self.carry.conversation is not None or self.carry.messages
            before = self.carry.messages if started else [opening(spec, self.tools)]
            text = inp.input + variables_note(repl.variables if repl else [])
            text += untold_note(self.carry.untold_effects)
            if self.carry.undone_effects and run.effects is not None:
                # Only after a rewind, or in a fork: what the undone turns (or the source) did stays done, and is
                # never done again.
                source = self.carry.forked_from
                label = (
                    f"session {source}, which this session is a fork of"
                    if source
                    else "turns of this session that a rewind undid"
                )
                run.effects.inherit(label, self.carry.undone_effects)
                text += "\n\n" + (run.effects.inherited_note() or "")
            try:
                result = await run_steps(run, [*before, Message.user(text), *forked])
            except GeneratorExit:
                raise  # see the outer ``except GeneratorExit``
            except BaseException:
                await self.quotas.settle()
                raise
            await self.quotas.settle()  # the turn's quota releases reach their accounts before it ends
            if result.status in ("completed", "completed_with_default"):
                self.carry.conversation, self.carry.messages = run.commit()
                self.carry.repl = run.repl
                self.carry.untold_effects = []  # the committed turn's message told them
            summary.status = result.status
            summary.output = preview(result.output if isinstance(result.output, str) else _json(result.output))
            return TurnResult(**result.model_dump(), session_id=workflow.info().workflow_id, turn=number)
        except GeneratorExit:
            # The worker dropped this instance and the garbage collector is closing the coroutine, on whatever
            # workflow's activation is current: the turn's bookkeeping (its totals upsert) would land in that
            # run's history, which no replay of it reproduces (tests/workflows/test_session_dropped_instance.py).
            dropped = True
            raise
        except FailureError as exc:
            summary.status = "failed"
            summary.output = preview(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if run is not None and not dropped and run.tools.ref is not None and self.tools is not None:
                # The catalog a call of this turn stored (or the one it was given) for the session's schemas:
                # durable once returned, so a failed turn's is kept too, and every later turn names it.
                self._use_tools(self.tools, run.tools.ref)
            if not dropped:
                summary.steps = len(progress.result.steps)
                summary.usage = progress.result.usage
                summary.violations = len(progress.result.violations)
                summary.cost_usd = progress.result.cost_usd
                summary.finished_at = workflow.now()
                if summary.status not in ("completed", "completed_with_default") and progress.result.effects:
                    # Rolled back, but what it did happened: carried until a turn's conversation says so.
                    effects = progress.result.effects
                    untold = UntoldEffects(
                        turn=number,
                        status=summary.status,
                        effects=effects[:EFFECTS_KEPT_PER_TURN],
                        more=max(0, len(effects) - EFFECTS_KEPT_PER_TURN),
                    )
                    self.carry.untold_effects = [*self.carry.untold_effects, untold][-UNTOLD_TURNS_KEPT:]
                self.carry.checkpoints = [
                    *self.carry.checkpoints,
                    TurnCheckpoint(
                        turn=number,
                        conversation=self.carry.conversation,
                        messages=self.carry.messages,
                        repl=self.carry.repl,
                        effects=progress.result.effects,
                    ),
                ][-self.inp.session.turns_kept :]
                self._finish_turn(summary)

    def _use_tools(self, tools: list[ToolSchema] | None, ref: ToolCatalogRef | None = None) -> None:
        """The one place the session's schemas change, and their catalog with them: new schemas (a describe)
        come with no ref, so the next call carrying them stores a catalog of exactly them."""
        self.tools, self.tools_ref = tools, (ref if tools is not None else None)

    async def _describe(self, spec: AgentSpec) -> list[ToolSchema]:
        """The spec's tool schemas, asked at a turn: a failure (a server down past its ``give_up_seconds``, a
        tool no longer offered) fails this turn, typed and naming the server or tool, never the session."""
        try:
            return await spec_tools(spec)
        except ActivityError as exc:
            error = from_failure(exc)
            if error is None:
                raise
            raise to_application_error(error, *error.details) from exc

    @turn.validator
    def _check_turn(self, raw: Any) -> None:
        self._check_owned()
        if self.closed_reason is not None:
            raise to_application_error(SessionClosedError(f"the session is closed ({self.closed_reason})"))
        if self.current is not None:
            raise to_application_error(
                SessionBusyError(f"turn {self.current_turn} is still running; send this one when it ends")
            )
        try:
            parse_turn(raw, self.inp.session.max_input_chars)
        except ValueError as exc:
            raise to_application_error(InvalidTurnError(str(exc))) from None

    def _finish_turn(self, summary: TurnSummary) -> None:
        self._publish(
            ProgressEvent(
                kind="turn_ended",
                turn=summary.turn,
                at=workflow.now(),
                usage=summary.usage,
                detail=f"{summary.status}: {summary.output}",
            )
        )
        workflow_metrics.record_turn(summary.status, (workflow.now() - summary.started_at).total_seconds())
        carry = self.carry
        carry.turns_done = summary.turn
        carry.usage = carry.usage + summary.usage
        carry.steps += summary.steps
        carry.violations += summary.violations
        carry.cost_usd += summary.cost_usd
        carry.turns = [*carry.turns, summary][-self.inp.session.turns_kept :]
        carry.last_activity = workflow.now()
        if self.current is not None:
            self.last_steps = self.current.result.steps
        self.current, self.current_turn = None, None
        self.activity += 1
        self.visibility.totals(
            steps=carry.steps, usage=carry.usage, violations=carry.violations, cost_usd=carry.cost_usd, model=""
        )

    # ------------------------------------------------------------------ rewind

    @workflow.update(name=REWIND_UPDATE)
    async def rewind(self, raw: Any) -> SessionState:
        """Go on from the state after turn ``to_turn``: conversation and variables as they were then.

        The undone turns stay in ``rewinds`` (their summaries and effects); their effects are not undone, so
        every later turn is told of them and an identical call is answered from the record. Turn numbers go on
        counting, so effect keys and the audit trail never reuse one.
        """
        to_turn = RewindInput.model_validate(raw).to_turn
        kept = [c for c in self.carry.checkpoints if c.turn <= to_turn]
        undone = [c for c in self.carry.checkpoints if c.turn > to_turn]
        back = kept[-1] if kept else TurnCheckpoint(turn=0)
        effects = [e for c in undone for e in c.effects]
        undone_turns = {c.turn for c in undone}
        self.carry.rewinds = [
            *self.carry.rewinds,
            Rewind(
                to_turn=to_turn,
                at=workflow.now(),
                undone=[t for t in self.carry.turns if t.turn in undone_turns],
                effects=effects,
            ),
        ]
        self.carry.undone_effects = [*self.carry.undone_effects, *effects]
        self.carry.conversation, self.carry.messages, self.carry.repl = back.conversation, back.messages, back.repl
        self.carry.checkpoints = kept
        self.carry.last_activity = workflow.now()
        self.activity += 1
        return self.state()

    @rewind.validator
    def _check_rewind(self, raw: Any) -> None:
        if self.closed_reason is not None:
            raise to_application_error(SessionClosedError(f"the session is closed ({self.closed_reason})"))
        if self.current is not None:
            raise to_application_error(
                SessionBusyError(f"turn {self.current_turn} is still running; rewind when it ends")
            )
        try:
            to_turn = RewindInput.model_validate(raw).to_turn
        except ValueError as exc:
            raise to_application_error(InvalidTurnError(f'rewind takes {{"to_turn": N}}: {exc}')) from None
        # 0, a fresh session's state, is always known; the others are the kept turns still in effect.
        reachable = [0, *(c.turn for c in self.carry.checkpoints)]
        if to_turn not in reachable:
            raise to_application_error(
                InvalidTurnError(
                    f"cannot rewind to turn {to_turn}: the turns this session can go back to are "
                    f"{', '.join(map(str, reachable))} (undone turns and turns older than turns_kept are gone)"
                )
            )

    # ------------------------------------------------------------------ close, cancel, queries

    @workflow.update(name=CLOSE_UPDATE)
    async def close(self, inp: CloseInput) -> SessionState:
        """No new turns from now on; a running turn finishes first."""
        self.closed_reason = inp.reason
        await workflow.wait_condition(lambda: self.current is None)
        return self.state()

    @close.validator
    def _check_close(self, inp: CloseInput) -> None:
        self._check_owned()
        if self.closed_reason is not None:
            raise to_application_error(SessionClosedError(f"the session is already closed ({self.closed_reason})"))

    def _check_owned(self) -> None:
        if self.refused is not None:
            raise to_application_error(self.refused)

    def _check_decisions_open(self) -> None:
        self._check_owned()
        if self.closed_reason is not None and self.current is None:
            raise to_application_error(SessionClosedError(f"the session is closed ({self.closed_reason})"))

    @workflow.signal(name=CANCEL_SIGNAL)
    def cancel(self) -> None:
        """Stops the running turn before its next step; the session stays open."""
        if self.current is not None:
            self.current.request_cancel()

    @workflow.query(name=STATE_QUERY)
    def state(self) -> SessionState:
        status: SessionStatus = (
            "closed" if self.closed_reason is not None else "running" if self.current is not None else "idle"
        )
        return SessionState(
            session_id=workflow.info().workflow_id,
            status=status,
            turns=self.carry.turns_done,
            current_turn=self.current_turn,
            usage=self.carry.usage,
            created_at=self.carry.created_at,
            last_activity=self.carry.last_activity,
            idle_timeout_seconds=self.inp.session.idle_timeout_seconds,
            continued=self.carry.continued,
            closed_reason=self.closed_reason,
            variables=self.carry.repl.variables if self.carry.repl else [],
            untold_effects=list(self.carry.untold_effects),
            steps=self.carry.steps,
            violations=self.carry.violations,
            cost_usd=self.carry.cost_usd,
            mode=self.inp.spec.mode,
            rewinds=self.carry.rewinds,
            forked_from=self.carry.forked_from,
        )

    @workflow.query(name=FORK_SOURCE_QUERY)
    def fork_source(self) -> ForkSource:
        return ForkSource(
            owner=self.owner,
            checkpoints=list(self.carry.checkpoints),
            undone_effects=list(self.carry.undone_effects),
            untold_effects=list(self.carry.untold_effects),
            rewinds=list(self.carry.rewinds),
        )

    @workflow.query(name=TURNS_QUERY)
    def turns(self) -> list[TurnSummary]:
        return list(self.carry.turns)

    @workflow.query(name=STEPS_QUERY)
    def steps(self, since: int = 0) -> list[Step]:
        """The running turn's steps from index ``since`` on, else the last turn's (while this run holds them)."""
        return (self.current.result.steps if self.current is not None else self.last_steps)[since:]

    @workflow.query(name=CURRENT_TURN_QUERY)
    def current_turn_state(self) -> AgentState | None:
        return self.current.state() if self.current is not None else None

    def _publish(self, event: ProgressEvent) -> None:
        self.stream.topic(PROGRESS_TOPIC).publish(event)
        self.published += 1
        if event.kind == "turn_ended":
            # The llm.call activity publishes the answer's text too (stream_tokens): count what the log holds.
            self.published = len(self.stream.get_state().log)
        # Keep the stream (and what continue-as-new carries) bounded; followers read within seconds.
        if self.published > 2 * _EVENTS_KEPT:
            self.stream.truncate(self.stream_base + self.published - _EVENTS_KEPT)
            self.stream_base += self.published - _EVENTS_KEPT
            self.published = _EVENTS_KEPT

    def _history_is_long(self) -> bool:
        info = workflow.info()
        config = self.inp.session
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= config.continue_after_events
            or info.get_current_history_size() >= config.continue_after_bytes
        )


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


__all__ = ["IDLE_TIMEOUT_REASON", "SessionWorkflow"]
