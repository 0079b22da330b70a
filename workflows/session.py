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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    from pydantic import TypeAdapter
    from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

    from ..contracts import AgentResult, AgentSpec, AgentState, Message, Step, ToolSchema
    from ..contracts.code.program import ReplMemory
    from ..contracts.code.variables import variables_note
    from ..contracts.errors import (
        CarriedStateError,
        InvalidTurnError,
        SessionBusyError,
        SessionClosedError,
        TurnAlreadyAnsweredError,
    )
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
        CloseInput,
        ForkSource,
        ProgressEvent,
        RewindInput,
        SessionConfig,
        SessionFork,
        SessionForkBound,
        SessionForkInput,
        SessionInput,
        SessionOutcome,
        SessionPoint,
        SessionState,
        SessionStatus,
        TurnResult,
        TurnSummary,
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
    from .entries import NO_INPUT, decoded, update_input
    from .quota_gate import QuotaDesk, QuotaHandlers, RunPlan, worker_plan
    from .releases.gates import Features, carries_decisions, takes_carried_tools
    from .run_state import RunProgress
    from .session_state import SessionRecord
    from .steps import check_key_scope, check_tenant, opening, run_steps, spec_tools
    from .stream_polls import guard_stream_polls
    from .visibility import Visibility

IDLE_TIMEOUT_REASON = "idle_timeout"
_EVENTS_KEPT = 500
_STREAM_POLLS_IN_FLIGHT = 3
"""Long-poll stream Updates a session admits at once (readers of older releases): Temporal allows 10 Updates
in flight per workflow, and the rest are for turns, approvals and close. Readers now poll by query."""
_COMPLETED = ("completed", "completed_with_default")


@dataclass
class _Turn:
    """The running turn, from ``_begin`` until it is finished."""

    number: int
    summary: TurnSummary
    """Filled in as the turn goes; the session keeps it once the turn ends."""
    progress: RunProgress
    repl: ReplMemory | None
    """Code mode: the REPL memory every program of the turn starts from."""
    run: AgentRun | None = None
    """Set once the turn's tools are known."""
    committed: SessionPoint | None = None
    """Set when the steps completed: where the session goes on from."""


@workflow.defn(name=SESSION_WORKFLOW)
class SessionWorkflow(ApprovalHandlers, QuotaHandlers):
    @workflow.init
    def __init__(self, raw: RawValue = NO_INPUT) -> None:
        now = workflow.now()
        info = workflow.info()
        # Decoded here, not by the SDK: a wrong shape fails the run at once (``run`` raises it), never the
        # workflow task forever; the session then holds an empty input and loads nothing.
        decoded_inp, self.malformed = decoded(raw, SessionInput, f"{SESSION_WORKFLOW} input")
        inp = self.inp = decoded_inp or SessionInput.model_construct(session=SessionConfig())
        self.owner = session_owner(info.workflow_id, info.first_execution_run_id)
        problem = (
            carried_problem(
                inp,
                workflow_id=info.workflow_id,
                first_run_id=info.first_execution_run_id,
                continued=info.continued_run_id is not None,
                cron=bool(info.cron_schedule),
                attempt=info.attempt,
            )
            if self.malformed is None
            else None
        )
        self.refused = CarriedStateError(problem) if problem is not None else None
        """Set when the input carried state this session does not own: it loads none of it, every
        Update is refused with it, and the run fails with it."""
        loads = self.refused is None and self.malformed is None
        carried, stream = (inp.carried, inp.stream) if loads else (None, None)
        kept = inp.session.turns_kept
        self.record = (
            SessionRecord(carried, turns_kept=kept) if carried is not None else SessionRecord.new(now, turns_kept=kept)
        )
        """The carried state: read through it, changed only by its verbs."""
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
        self.plan = RunPlan()
        """The run's quota plan: decided before ``tools_decided`` (so before any turn's first call), or, under
        the newest release, learned from this run's first model call, for every turn after it."""
        self.approvals.remember(self.record.decided)
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
        guard_stream_polls(self.stream, _STREAM_POLLS_IN_FLIGHT)
        self.last_turn_start: int | None = None
        """Where the last turn began on the stream (this run's own turns only): trimming cuts there at most."""
        self.activity = 0
        """Bumped at every turn's start and end: the idle timer starts over."""
        self.last_steps: list[Step] = []
        """The steps of the turn that ended last, for the ``steps`` query (memory only; never carried)."""
        self.visibility = Visibility()
        self.approvals.on_change = self.visibility.awaiting
        self.fork: SessionFork | None = inp.fork if loads and inp.carried is None else None
        """A new session forked from another's turn: its first turn goes on from the source's state there."""
        self.fork_failed: BaseException | None = None
        if self.fork is not None:
            self.record.start_fork(self.fork)

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> SessionOutcome:
        if self.malformed is not None:
            workflow_metrics.record_malformed_input("start", SESSION_WORKFLOW)
            raise self.malformed
        if self.refused is not None:
            raise to_application_error(self.refused)
        inp = self.inp
        check_key_scope(inp.key_scope)
        check_tenant(inp.tenant)
        if inp.carried is None:
            workflow_metrics.record_session_started()
            self.visibility.start(inp.spec, inp.tenant)
        else:
            self.visibility.resume()
        # The worker's config decides every turn's quotas and budget, never the input (recorded runs: as sent);
        # a continued run asks again, so a session lasting days follows the config its workers have now.
        self.plan = await worker_plan(inp.tenant, inp.quota, from_caller=inp.carried is None)
        if takes_carried_tools():
            # A continued run takes the schemas it carries; a new one (or one carried by an older release)
            # describes its tools at its next turn. Either way nothing here can fail: a continue-as-new
            # never ends a session, and a failed describe fails at most that turn.
            self._use_tools(self.record.tools, self.record.tools_ref)
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
                    turns=self.record.turns_done,
                    usage=self.record.usage,
                )
            if self.current is None and self._history_is_long():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self.current is None and self.closed_reason is None:
                    self.record.count_continue_as_new()
                    carry_decisions = carries_decisions()
                    workflow_metrics.record_session_continued()
                    await self.stream.continue_as_new(lambda state: [self._next_run(inp, state, carry_decisions)])

    def _next_run(self, inp: SessionInput, stream: Any, carry_decisions: bool) -> SessionInput:
        """The continued run's input, built at the last moment: after the stream's pollers are detached and
        every handler has finished, so a decision (or a turn) accepted while they finished is carried too."""
        carried = self.record.carry_over(
            decided=self.approvals.recent() if carry_decisions else None,
            chain=self.owner,
            tools=self.tools,
            tools_ref=self.tools_ref,
        )
        return SessionInput(
            spec=inp.spec,
            session=inp.session,
            carried=carried,
            stream=stream,
            key_scope=inp.key_scope,
            tenant=inp.tenant,
            # For a worker before QUOTA_FROM_WORKER_PATCH (a later one asks its own config): never a caller's plan.
            quota=self.plan.carried(inp.quota if inp.carried is not None else None),
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
        self.record.take_fork(fork, bound)

    # ------------------------------------------------------------------ turns

    @workflow.update(name=TURN_UPDATE)
    async def turn(self, raw: Any) -> TurnResult:
        """One turn, from where the session's conversation stands. Four ways out:

        1. a fork session whose state could not be bound: that failure, and nothing begins;
        2. another turn still running (two accepted in one workflow task both pass the validator): busy;
        3. the steps ended (completed, or failed or cancelled as a result): the result;
        4. a typed failure (the tools could not be described, a budget, a contract): raised.

        The last two commit the turn (it completed) or roll it back (the conversation stays as it was, its
        effects are carried as untold), then finish it; a turn whose instance the worker dropped does neither.
        """
        inp = parse_turn(raw, self.inp.session.max_input_chars)  # the validator already accepted it
        forked = await self._forked_messages()
        if self.current is not None:
            raise to_application_error(SessionBusyError("another turn is still running; send this one when it ends"))
        features = Features.at_start(one_shot=False)  # before the turn's first command, as every turn has
        running = self._begin(inp.input)
        dropped = False
        try:
            result = await self._run_steps(running, inp.input, forked, features)
            return self._answer(running, result)
        except GeneratorExit:
            # The worker dropped this instance and the garbage collector is closing the coroutine, on whatever
            # workflow's activation is current: the turn's bookkeeping (its totals upsert) would land in that
            # run's history, which no replay of it reproduces (tests/workflows/test_session_dropped_instance.py).
            dropped = True
            raise
        except FailureError as exc:
            running.summary.status = "failed"
            running.summary.output = preview(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if not dropped:
                self._commit_or_roll_back(running)
                self._finish(running.summary)

    async def _forked_messages(self) -> list[Message]:
        """A fork session's first turn: the forked turn's messages before the fork point, once the fork's state is
        bound (its failure, if it could not be, fails the turn). Any other turn: none."""
        if self.fork is None:
            return []
        await workflow.wait_condition(lambda: self.tools_decided)
        if self.fork_failed is not None:
            raise self.fork_failed
        if self.fork is None:
            # Another turn accepted before the state was bound took the forked messages and is running: this
            # one is answered busy by the caller, never run without them.
            return []
        forked, self.fork = self.fork.turn_messages, None
        return forked

    def _begin(self, text: str) -> _Turn:
        """The turn runs from here: queries and cancel see it, the idle timer starts over, followers are told."""
        number = self.record.next_turn
        info = workflow.info()
        own_repl = ReplMemory(key=repl_keys(info.workflow_id, info.first_execution_run_id)[0])
        repl = (self.record.point.repl or own_repl) if self.inp.spec.mode == "code" else None
        progress = RunProgress(repl=repl)
        self.current, self.current_turn = progress, number
        self.activity += 1
        update = workflow.current_update_info()
        summary = TurnSummary(
            turn=number,
            input=preview(text),
            status="running",
            started_at=workflow.now(),
            update_id=update.id if update is not None else None,
        )
        self._publish(ProgressEvent(kind="turn_started", turn=number, at=workflow.now(), detail=preview(text)))
        return _Turn(number=number, summary=summary, progress=progress, repl=repl)

    async def _run_steps(self, turn: _Turn, text: str, forked: list[Message], features: Features) -> AgentResult:
        """The turn's steps on its own ``AgentRun``, from the session's point; a completed turn's new point is
        kept in ``turn.committed`` (the session moves there when the turn ends)."""
        await workflow.wait_condition(lambda: self.tools_decided)
        spec = self.inp.spec
        tools = self.tools
        if tools is None:
            tools = await self._describe(spec)
            self._use_tools(tools)
        point = self.record.point
        run = turn.run = AgentRun.for_turn(
            spec,
            tools,
            features,
            turn=turn.number,
            conversation=point.conversation,
            approvals=self.approvals,
            progress=turn.progress,
            on_event=self._publish,
            stream_tokens=self.inp.session.stream_tokens,
            key_scope=self.inp.key_scope,
            quota=self.plan,
            quota_desk=self.quotas,
            tools_ref=self.tools_ref,
        )
        before = list(point.messages) if point.started else [opening(spec, tools)]
        try:
            result = await run_steps(run, [*before, Message.user(self._user_message(run, text, turn.repl)), *forked])
        except GeneratorExit:
            raise  # see ``turn``'s ``except GeneratorExit``
        except BaseException:
            await self.quotas.settle()
            raise
        await self.quotas.settle()  # the turn's quota releases reach their accounts before it ends
        if result.status in _COMPLETED:
            conversation, messages = run.commit()
            turn.committed = SessionPoint(conversation=conversation, messages=tuple(messages), repl=run.repl)
        return result

    def _user_message(self, run: AgentRun, text: str, repl: ReplMemory | None) -> str:
        """The turn's input, then what its model must know first: the REPL's variables, the effects of turns that
        failed since the last completed one, and (after a rewind, or in a fork) what the undone turns or the
        source did, which stays done and is never done again (the turn's ledger inherits it)."""
        text += variables_note(repl.variables if repl else [])
        text += untold_note(self.record.untold_effects)
        undone = self.record.undone_effects
        if undone and run.effects is not None:
            source = self.record.forked_from
            label = (
                f"session {source}, which this session is a fork of"
                if source
                else "turns of this session that a rewind undid"
            )
            run.effects.inherit(label, undone)
            text += "\n\n" + (run.effects.inherited_note() or "")
        return text

    def _answer(self, turn: _Turn, result: AgentResult) -> TurnResult:
        turn.summary.status = result.status
        turn.summary.output = preview(result.output if isinstance(result.output, str) else _json(result.output))
        return TurnResult(**result.model_dump(), session_id=workflow.info().workflow_id, turn=turn.number)

    def _commit_or_roll_back(self, turn: _Turn) -> None:
        """A completed turn moves the session to its point; any other goes back to where it started, its effects
        carried as untold. Either way the turn is a checkpoint and counts in the totals."""
        run, result, summary = turn.run, turn.progress.result, turn.summary
        if run is not None and run.tools.ref is not None and self.tools is not None:
            # The catalog a call of this turn stored (or the one it was given) for the session's schemas:
            # durable once returned, so a failed turn's is kept too, and every later turn names it.
            self._use_tools(self.tools, run.tools.ref)
        summary.steps = len(result.steps)
        summary.usage = result.usage
        summary.violations = len(result.violations)
        summary.cost_usd = result.cost_usd
        summary.finished_at = now = workflow.now()
        if turn.committed is not None:
            self.record.commit_turn(summary, turn.committed, result.effects, now=now)
        else:
            self.record.fail_turn(summary, result.effects, now=now)

    def _finish(self, summary: TurnSummary) -> None:
        """The turn is over: followers are told, the idle timer starts over, the search attributes get the totals."""
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
        if self.current is not None:
            self.last_steps = self.current.result.steps
        self.current, self.current_turn = None, None
        self.activity += 1
        record = self.record
        self.visibility.totals(
            steps=record.steps, usage=record.usage, violations=record.violations, cost_usd=record.cost_usd, model=""
        )

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
        update = workflow.current_update_info()
        answered = next((t for t in self.record.turns if t.update_id == update.id), None) if update else None
        if answered is not None:
            # Within a run Temporal answers a repeated id itself; a resend that crossed a continue-as-new is here.
            raise to_application_error(
                TurnAlreadyAnsweredError(
                    f"turn {answered.turn} already answered update {answered.update_id} ({answered.status});"
                    " it is not run again: read it with session_turns"
                )
            )
        if self.current is not None:
            raise to_application_error(
                SessionBusyError(f"turn {self.current_turn} is still running; send this one when it ends")
            )
        try:
            parse_turn(raw, self.inp.session.max_input_chars)
        except ValueError as exc:
            raise to_application_error(InvalidTurnError(str(exc))) from None

    # ------------------------------------------------------------------ rewind

    @workflow.update(name=REWIND_UPDATE)
    async def rewind(self, raw: Any) -> SessionState:
        """Go on from the state after turn ``to_turn``: conversation and variables as they were then.

        The undone turns stay in ``rewinds`` (their summaries and effects); their effects are not undone, so
        every later turn is told of them and an identical call is answered from the record. Turn numbers go on
        counting, so effect keys and the audit trail never reuse one.
        """
        to_turn = RewindInput.model_validate(raw).to_turn
        self.record.rewind(to_turn, now=workflow.now())
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
        reachable = self.record.rewind_targets()
        if to_turn not in reachable:
            raise to_application_error(
                InvalidTurnError(
                    f"cannot rewind to turn {to_turn}: the turns this session can go back to are "
                    f"{', '.join(map(str, reachable))} (undone turns and turns older than turns_kept are gone)"
                )
            )

    # ------------------------------------------------------------------ close, cancel, queries

    @workflow.update(name=CLOSE_UPDATE)
    async def close(self, raw: RawValue = NO_INPUT) -> SessionState:
        """No new turns from now on; a running turn finishes first."""
        self.closed_reason = _close_input(raw).reason
        await workflow.wait_condition(lambda: self.current is None)
        return self.state()

    @close.validator
    def _check_close(self, raw: RawValue = NO_INPUT) -> None:
        self._check_owned()
        _close_input(raw)
        if self.closed_reason is not None:
            raise to_application_error(SessionClosedError(f"the session is already closed ({self.closed_reason})"))

    def _check_owned(self) -> None:
        if self.malformed is not None:
            raise self.malformed
        if self.refused is not None:
            raise to_application_error(self.refused)

    def _check_decisions_open(self) -> None:
        self._check_owned()
        if self.closed_reason is not None and self.current is None:
            raise to_application_error(SessionClosedError(f"the session is closed ({self.closed_reason})"))

    @workflow.signal(name=CANCEL_SIGNAL)
    def cancel(self, *ignored: Any) -> None:
        """Stops the running turn before its next step; the session stays open (arguments are ignored)."""
        if self.current is not None:
            self.current.request_cancel()

    @workflow.query(name=STATE_QUERY)
    def state(self) -> SessionState:
        status: SessionStatus = (
            "closed" if self.closed_reason is not None else "running" if self.current is not None else "idle"
        )
        record = self.record
        return SessionState(
            session_id=workflow.info().workflow_id,
            status=status,
            turns=record.turns_done,
            current_turn=self.current_turn,
            usage=record.usage,
            created_at=record.created_at,
            last_activity=record.last_activity,
            idle_timeout_seconds=self.inp.session.idle_timeout_seconds,
            continued=record.continued,
            closed_reason=self.closed_reason,
            variables=record.variables,
            untold_effects=record.untold_effects,
            steps=record.steps,
            violations=record.violations,
            cost_usd=record.cost_usd,
            mode=self.inp.spec.mode,
            rewinds=record.rewinds,
            forked_from=record.forked_from,
        )

    @workflow.query(name=FORK_SOURCE_QUERY)
    def fork_source(self) -> ForkSource:
        return self.record.fork_source(self.owner)

    @workflow.query(name=TURNS_QUERY)
    def turns(self) -> list[TurnSummary]:
        return self.record.turns

    @workflow.query(name=STEPS_QUERY)
    def steps(self, since: int = 0) -> list[Step]:
        """The running turn's steps from index ``since`` on, else the last turn's (while this run holds them)."""
        return (self.current.result.steps if self.current is not None else self.last_steps)[since:]

    @workflow.query(name=CURRENT_TURN_QUERY)
    def current_turn_state(self) -> AgentState | None:
        return self.current.state() if self.current is not None else None

    def _publish(self, event: ProgressEvent) -> None:
        if event.kind == "turn_started":
            self._trim_stream()
        self.stream.topic(PROGRESS_TOPIC).publish(event)

    def _trim_stream(self) -> None:
        """Keeps the stream (and what continue-as-new carries) bounded, cut only where a turn starts: the turn
        that ended last stays whole, with earlier events up to ``_EVENTS_KEPT`` in all, so a reader resuming
        from any kept position folds whole turns (docs/sessions.md#resume-a-stream). In memory: no command."""
        end = self.stream._on_offset()  # noqa: SLF001 - the log's end; get_state() would copy the whole log
        if self.last_turn_start is not None:
            cut = min(self.last_turn_start, end - _EVENTS_KEPT)
            if cut > self.stream._base_offset:  # noqa: SLF001
                self.stream.truncate(cut)
        self.last_turn_start = end

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


def _close_input(raw: RawValue) -> CloseInput:
    """``close`` takes ``{"reason": ...}`` or nothing; anything else is refused in its validator."""
    return CloseInput() if raw is NO_INPUT else update_input(raw, CloseInput, CLOSE_UPDATE)


__all__ = ["IDLE_TIMEOUT_REASON", "SessionWorkflow"]
