"""One agent run: its state (``run_state``) and the calls every loop makes through it.

``AgentRun`` is what a loop talks to: the contracted model call (token budget
included), tool calls under the run's effect keys, approvals, step records
and the violation ladder's effects on the result. It holds a frozen
``RunConfig`` (what the run is), its ``RunTools`` (the schemas, and what the
run learns about them), the ``RunProgress`` its owner also reads (what it has
done) and the run's ``Features`` (patched behaviours, chosen once). The
workflow only builds it (``one_shot`` or ``for_turn``) and answers queries
from the progress, so a loop never needs the workflow object.

The code here is today's path. Where a run recorded before a patch does
something else, one named ``Features`` question decides, and the old branch
is a call into ``releases/older_runs.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        AgentResult,
        AgentSpec,
        LLMRequest,
        LLMResponse,
        Message,
        Step,
        ToolCallRecord,
        ToolCallResult,
        ToolSchema,
    )
    from ..contracts.approvals import rejection_message
    from ..contracts.code.carried import CarriedProgram, the_call_alone
    from ..contracts.code.program import ReplMemory
    from ..contracts.errors import BudgetExceededError, DeploymentConfigError, InvalidSpecError, ToolConfigError
    from ..contracts.llm.conversation import ConversationRef
    from ..contracts.llm.next_call import NextModelAnswer, NextModelCall
    from ..contracts.llm.request import TokenStream
    from ..contracts.llm.tokens import prompt_tokens_upper_bound
    from ..contracts.llm.tool_catalog import ToolCatalogRef
    from ..contracts.llm.tools import catalog_digest
    from ..contracts.persisted_ids import effect_scope, turn_scope
    from ..contracts.session import ProgressEvent, ProgressKind, text_digest
    from ..failures import from_failure, to_application_error
    from ..telemetry import workflow_metrics
    from .approvals import ApprovalDesk
    from .calls import PlanFirst, account, budget_exceeded, call_llm, call_tool
    from .conversation import ConversationChain
    from .effects import EffectLedger, run_chain
    from .ladder import Rung, ViolationLadder, retry_history, violation_error
    from .quota_gate import QuotaDesk, QuotaRefused, RunPlan, leased_call, soft_budget_degradation
    from .releases.gates import Features
    from .releases.older_runs import answer_from_record_after_approval, call_llm_unreserved, call_tool_keyed_by_run
    from .run_state import RunConfig, RunProgress, RunTools


PROGRAM_KEPT = 20_000
"""Characters of a step's program kept on its record (the console shows it)."""


class BudgetRefused(Exception):
    """A model call that would not fit the token budget with every call in flight; nothing was sent."""


class AgentRun:
    def __init__(
        self, config: RunConfig, tools: RunTools, features: Features, progress: RunProgress | None = None
    ) -> None:
        self.config = config
        self.tools = tools
        self.features = features
        self.progress = progress if progress is not None else RunProgress()
        self.effects = EffectLedger(run_chain(config.key_scope), self.result.effects) if features.effects_once else None
        self._digest_tools()
        self.result.mode = config.spec.mode

    @classmethod
    def one_shot(
        cls,
        spec: AgentSpec,
        tools: Sequence[ToolSchema],
        features: Features,
        *,
        progress: RunProgress,
        approvals: ApprovalDesk,
        pending_tools: Sequence[str] = (),
        key_scope: str | None = None,
        quota: RunPlan | None = None,
        quota_desk: QuotaDesk | None = None,
    ) -> AgentRun:
        """An ``AgentWorkflow`` run; its conversation is stored when ``features.conversation_ref``.

        With ``pending_tools`` (and no ``tools``) the first model call resolves the names on the worker."""
        chain = ConversationChain.own_chain(None) if features.conversation_ref else None
        config = RunConfig(
            spec=spec, approvals=approvals, chain=chain, key_scope=key_scope, quota=quota, quota_desk=quota_desk
        )
        return cls(config, RunTools(tools, pending=pending_tools), features, progress)

    @classmethod
    def for_turn(
        cls,
        spec: AgentSpec,
        tools: Sequence[ToolSchema],
        features: Features,
        *,
        turn: int,
        conversation: ConversationRef | None,
        approvals: ApprovalDesk,
        progress: RunProgress,
        on_event: Callable[[ProgressEvent], None] | None = None,
        stream_tokens: bool = False,
        key_scope: str | None = None,
        quota: RunPlan | None = None,
        quota_desk: QuotaDesk | None = None,
        tools_ref: ToolCatalogRef | None = None,
    ) -> AgentRun:
        """One session turn: keys scoped ``t<turn>.``, the conversation stored on top of ``conversation``;
        ``tools_ref`` the session's catalog of exactly ``tools`` (None: the turn's first call stores one)."""
        config = RunConfig(
            spec=spec,
            approvals=approvals,
            chain=ConversationChain.own_chain(conversation),
            scope=turn_scope(turn),
            turn=turn,
            on_event=on_event,
            stream_tokens=stream_tokens,
            key_scope=key_scope,
            quota=quota,
            quota_desk=quota_desk,
        )
        return cls(config, RunTools.for_turn(tools, tools_ref), features, progress)

    # ------------------------------------------------------------------ reading the state

    @property
    def spec(self) -> AgentSpec:
        return self.config.spec

    @property
    def scope(self) -> str:
        return self.config.scope

    @property
    def result(self) -> AgentResult:
        return self.progress.result

    @property
    def history(self) -> list[Message]:
        return self.progress.history

    @property
    def repl(self) -> ReplMemory | None:
        return self.progress.repl

    # ------------------------------------------------------------------ changing it

    def _digest_tools(self) -> None:
        # The schemas themselves are in history (the tools.describe or resolving call's result); the digest lets
        # an audit compare them with a catalog. Pure, no command: runs recorded before it replay unchanged.
        schemas = self.tools.schemas
        self.result.catalog_digest = catalog_digest(list(schemas)) if schemas else ""

    def advance(self, history: list[Message]) -> list[Message]:
        """The one way the run's history changes: the loop's conversation as it now stands (returned as is)."""
        return self.progress.advance(history)

    def commit(self) -> tuple[ConversationRef | None, list[Message]]:
        """A session turn's end: the stored conversation and the messages after it."""
        assert self.config.chain is not None, "a turn always has a chain"
        return self.config.chain.commit(self.history)

    def emit(self, kind: ProgressKind, **fields: Any) -> None:
        if self.config.on_event is not None:
            self.config.on_event(ProgressEvent(kind=kind, turn=self.config.turn, at=workflow.now(), **fields))

    def ladder(self) -> ViolationLadder:
        spec = self.spec
        return ViolationLadder(
            [spec.model, *spec.fallback_models],
            spec.reprompt_budget,
            spec.default_result,
            release=self.features.release,
        )

    def cancelled(self) -> bool:
        """True (and the result says so) once a cancel arrived; checked before each step."""
        if self.progress.cancel_requested:
            self.result.status = "cancelled"
        return self.progress.cancel_requested

    async def call_llm(self, request: LLMRequest, *, refusable: bool = False, standalone: bool = False) -> LLMResponse:
        """One contracted LLM call; every model call of the run goes here, so one token budget holds.

        Each call reserves its ``max_tokens`` before it starts and carries what
        the budget has left (``token_allowance``), which the ``llm.call``
        precondition checks against its prompt + ``max_tokens`` before anything is
        sent. A concurrent call (a program's ``llm()``, whose prompt is short) also
        reserves a bound on its prompt, so calls in flight cannot overshoot the
        budget together. A call that does not fit raises ``BudgetExceededError``,
        or ``BudgetRefused`` when ``refusable`` (the caller answers it another way).

        A loop step's request carries the run's history (the tail of a stored
        conversation, see ``ConversationChain``); a ``standalone`` one (a
        program's ``llm()``) has its own messages and never joins the chain.
        """
        self.progress.model = request.config.model
        config = self.config
        if not standalone:
            request = self._under_context_policy(request)
        if config.stream_tokens and not standalone and self.features.token_stream:
            request = request.model_copy(update={"stream": TokenStream(turn=config.turn, step=len(self.result.steps))})
        chain = None if standalone else config.chain
        resolving = bool(self.tools.pending) and not standalone
        if resolving:
            request = request.model_copy(update={"tool_names": list(self.tools.pending)})
        try:
            response = await self._planned(request, chain, refusable)
        except ActivityError as exc:
            # A spec whose tools do not resolve fails the run as tools.describe and the spec check did.
            if resolving and isinstance(from_failure(exc), (InvalidSpecError, ToolConfigError)):
                raise exc.cause from None  # type: ignore[misc]
            raise
        self._took(request, chain, response, resolving)
        return response

    def _took(
        self, request: LLMRequest, chain: ConversationChain | None, response: LLMResponse, resolving: bool
    ) -> None:
        """What the run learns from a model call's answer: its tools, its stored conversation, its cost."""
        if resolving:
            if response.tools is None:
                # llm.call.resolving_tools always returns them; a worker that did not is misbuilt, never
                # a reason to go on as if the run had no tools.
                raise to_application_error(
                    DeploymentConfigError(
                        "the worker that ran the run's first model call did not resolve its tool names"
                    )
                )
            self.tools.learn(response.tools, response.tools_ref)
            self._digest_tools()
        else:
            self.tools.stored_as(response.tools_ref)
        if chain is not None and response.conversation is not None:
            chain.learn(request.messages, response.conversation)
        self.result.cost_usd += response.cost_usd

    def next_call(self, request: LLMRequest, tool: ToolSchema | None) -> NextModelCall | None:
        """The next step's model call, for a step's only tool call to carry (``contracts/llm/next_call.py``), its
        tokens reserved; ``request`` is that call's but for the tool message, which the activity appends.

        None when the call goes as its own ``llm.call``: the tool may not be made again harmlessly by a retry
        (side effects, an approval, another delivery, a heartbeat timeout the model call would not beat), or
        the call needs what only the workflow does around it (a quota plan, a token stream, tools to resolve,
        a conversation not stored), or it would not fit the budget (the own call then fails it, typed).
        """
        spec, config, quota = self.spec, self.config, self.config.quota
        if (
            not self.features.release  # first: a run recorded before it asks its patches where it always did
            or self.progress.cancel_requested  # the run stops before its next step: no model call after the tool
            or tool is None
            or tool.side_effects
            or tool.requires_approval
            or tool.delivery != "retry"
            or spec.tool_policy.heartbeat_seconds is not None
            or config.chain is None
            or self.tools.pending
            or (quota is not None and (not quota.known or quota.plan is not None))
            or (config.stream_tokens and self.features.token_stream)
        ):
            return None
        allowance = self._allowance()
        if request.config.max_tokens > allowance:
            return None
        request = self._under_context_policy(request).model_copy(update={"token_allowance": allowance})
        return NextModelCall(
            request=self._wire(request, config.chain),
            tool_cap=self.tool_result_cap(),
            seconds=spec.llm_policy.start_to_close_seconds,
        )

    @contextmanager
    def reserving(self, call: NextModelCall | None) -> Iterator[None]:
        """``call``'s tokens held by the budget while its tool call (which makes it) runs, as a call in flight."""
        reserve = call.request.config.max_tokens if call is not None else 0
        self.progress.reserved_tokens += reserve
        try:
            yield
        finally:
            self.progress.reserved_tokens -= reserve

    def took_next(
        self, call: NextModelCall, messages: list[Message], answer: NextModelAnswer | None
    ) -> LLMResponse | None:
        """The answer a tool call carried to ``call``, taken as an ``llm.call`` result is (``messages``: the
        request's, the tool message last); None when none came, and the loop calls the model itself."""
        if answer is None:
            return None
        response = answer.response
        self.progress.model = call.request.config.model
        self._took(call.request.model_copy(update={"messages": messages}), self.config.chain, response, False)
        account(response, self.result, self.spec.token_budget)
        return response

    def _allowance(self) -> int:
        """What the token budget has left for a new call: spent tokens and calls in flight counted."""
        return self.spec.token_budget - self.result.usage.total_tokens - self.progress.reserved_tokens

    def _under_context_policy(self, request: LLMRequest) -> LLMRequest:
        """A loop step's request, carrying the spec's context policy (what ``llm.call`` does when it overflows)."""
        policy = self.spec.context_policy
        return request if policy == "none" else request.model_copy(update={"context_policy": policy})

    async def _planned(self, request: LLMRequest, chain: ConversationChain | None, refusable: bool) -> LLMResponse:
        """The call under the run's quota plan; while the plan is unknown, the first call asks the worker for it
        (``llm.call.plan_first``, made at once when the worker has none) and the others wait for the answer."""
        quota = self.config.quota
        while quota is not None and not quota.known:
            if quota.asking:
                await workflow.wait_condition(lambda: quota.known or not quota.asking)
                continue
            quota.asking = True
            try:
                response = await self._send(request, chain, refusable, plan_first=True)
            except PlanFirst as first:
                quota.learn(first.plan)  # nothing was sent: the call goes again, under the plan
            else:
                quota.learn(None)
                return response
            finally:
                quota.asking = False
        if quota is None or quota.plan is None:
            return await self._send(request, chain, refusable)
        return await self._leased(request, chain, refusable)

    async def _send(
        self,
        request: LLMRequest,
        chain: ConversationChain | None,
        refusable: bool,
        plan_first: bool = False,
    ) -> LLMResponse:
        if not self.features.effects_once:  # a run recorded before EFFECTS_PATCH
            return await call_llm_unreserved(self, self._wire(request, chain))
        return await self._reserved_call(request, chain, refusable, plan_first)

    def _wire(self, request: LLMRequest, chain: ConversationChain | None) -> LLMRequest:
        """What goes into history: the conversation by its stored prefix and, once a call stored the run's (or
        session's) tool catalog, its schemas by that catalog. Only here, after every bound was taken on the
        request with its schemas; and only for the run's own schemas on its own chain (the catalog's owner).
        A session turn with no catalog yet asks its call carrying the schemas to store them (``store_tools``,
        which a worker before catalogs ignores). Which branch a call takes follows from recorded values only
        (an earlier result's ``tools_ref``, carried state), so no patch is needed."""
        if chain is None:
            return request
        return self.tools.on_the_wire(request, chain.request(request))

    async def _leased(self, request: LLMRequest, chain: ConversationChain | None, refusable: bool) -> LLMResponse:
        """The call under the run's quota plan (``quota_gate``): a tenant's hard limit fails it typed."""
        config = self.config
        assert config.quota is not None and config.quota.plan is not None and config.quota_desk is not None
        plan = config.quota.plan

        def waiting(change: int) -> None:
            self.progress.quota_waits += change

        tenant = plan.tenant

        def degraded(from_model: str, to: str) -> None:
            self.result.degradations.append(soft_budget_degradation(len(self.result.steps), tenant, from_model, to))

        async def send(sent: LLMRequest) -> LLMResponse:
            self.progress.model = sent.config.model
            return await self._send(sent, chain, refusable)

        try:
            return await leased_call(config.quota_desk, plan, request, send, waiting, degraded)
        except QuotaRefused as refused:
            if refusable:
                raise BudgetRefused(str(refused)) from None
            raise refused.failure() from None

    async def _reserved_call(
        self,
        request: LLMRequest,
        chain: ConversationChain | None,
        refusable: bool,
        plan_first: bool = False,
    ) -> LLMResponse:
        spec, progress = self.spec, self.progress
        used = self.result.usage.total_tokens
        allowance = self._allowance()
        # The byte bound is linear in the prompt; only the short concurrent prompts pay it here.
        reserve = request.config.max_tokens + (prompt_tokens_upper_bound(request) if refusable else 0)
        if reserve > allowance:
            message = (
                f"token budget: {used} used + {progress.reserved_tokens} reserved by calls in flight + {reserve} "
                f"for this call > {spec.token_budget}"
            )
            if refusable:
                raise BudgetRefused(message)
            raise budget_exceeded(message)
        progress.reserved_tokens += reserve
        sent = request.model_copy(update={"token_allowance": allowance})
        try:
            return await call_llm(
                self._wire(sent, chain),
                spec.llm_policy,
                self.result,
                token_budget=spec.token_budget,
                plan_first=plan_first,
                tenant=self.config.quota.tenant if self.config.quota is not None else None,
            )
        except ActivityError as exc:
            error = from_failure(exc)
            if not isinstance(error, BudgetExceededError):
                raise
            # The run fails (or the program's llm() is refused) as it would had the workflow seen it first.
            if refusable:
                raise BudgetRefused(str(error)) from None
            raise to_application_error(error) from None
        finally:
            progress.reserved_tokens -= reserve

    async def call_tool(
        self,
        schema: ToolSchema | None,
        name: str,
        arguments: str,
        *,
        call_id: str,
        scope: str,
        approval_id: str,
        model_text: str = "",
        program: str = "",
        for_model: bool = False,
        carried: CarriedProgram | None = None,
        next_call: NextModelCall | None = None,
    ) -> ToolCallResult:
        """One tool call under the run's effect keys, after its approval if the tool requires one.

        A repeat of a completed effect is answered from the record, before any approval is asked:
        what already happened is not a person's decision to make again (and a rejection would tell the
        model it did not run). ``scope`` is prefixed with the run's own (a session's turn), so equal calls
        in two turns are two effects. ``model_text`` or ``program`` is what an approver sees around the call.
        ``for_model``: a tool-mode step's call, whose result the model reads next; under the release the
        activity stores that tool message in the run's conversation store and the next call names it.
        ``carried``: the code-mode program waiting on this call alone (``CarriedProgram``); a result from the
        activity may then carry its next pause (``CarryingCallResult``), never one from the record.
        ``next_call``: the model call after this one (``next_call``), which the activity may answer too.
        """
        if self.effects is None:  # a run recorded before EFFECTS_PATCH
            return await call_tool_keyed_by_run(
                self, name, arguments, call_id=call_id, approval_id=approval_id, model_text=model_text, program=program
            )
        # Before any await: ordinals follow call order.
        key = self.effects.key(effect_scope(self.scope, scope), name, arguments)
        effectful = schema is not None and schema.side_effects
        done = (
            (self.effects.completed(key, call_id) or self.effects.inherited(name, arguments, call_id))
            if effectful
            else None
        )
        if done is not None:
            if self.features.asks_approval_again(schema):  # a run recorded before EXACTLY_ONCE_PATCH
                return await answer_from_record_after_approval(
                    self,
                    done,
                    approval_id=approval_id,
                    call_id=call_id,
                    name=name,
                    arguments=arguments,
                    model_text=model_text,
                    program=program,
                )
            self.emit("tool_call", tool=name, detail=f"answered from the record: {arguments[:460]}")
            return done
        rejected = await self.rejection(approval_id, call_id, name, arguments, model_text=model_text, program=program)
        if rejected is not None:
            return rejected
        chain = self.config.chain
        store_for = chain.owner if for_model and chain is not None and self.features.release else ""
        result = await call_tool(
            name,
            arguments,
            call_id=call_id,
            key=key,
            policy=self.spec.tool_policy,
            delivery=schema.delivery if schema else None,
            store_for=store_for,
            store_cap=self.tool_result_cap() if store_for else None,
            program=carried,
            next_call=next_call,
        )
        if effectful:
            # The record answers a repeat of the effect: the tool's result, not a pause of this program.
            self.effects.record(key, name, arguments, the_call_alone(result))
        return result

    def tool_result_cap(self) -> int | None:
        """Where a tool message the model reads is cut (None: runs recorded before the cap)."""
        return self.spec.tool_result_chars if self.features.tool_result_cap else None

    def effects_note(self, python_name: Callable[[str], str] = str) -> str | None:
        return self.effects.note(python_name) if self.effects is not None else None

    async def rejection(
        self, approval_id: str, call_id: str, tool: str, arguments: str, *, model_text: str = "", program: str = ""
    ) -> ToolCallResult | None:
        """None when the call may run now; otherwise the tool error the model reads (rejected or timed out).

        A tool that requires approval waits here for the ``approve`` / ``reject`` Update; the approver
        sees ``model_text`` (what the model wrote beside the call) or the ``program`` making it.
        """
        schema = self.tools.schema(tool)
        # The patch is asked only where a gate would be added, so runs without such tools keep their commands.
        if schema is None or not schema.requires_approval or not self.features.approvals:
            self.emit("tool_call", tool=tool, detail=arguments[:500])
            return None
        record = await self.config.approvals.gate(
            approval_id,
            schema,
            arguments,
            self.spec.approval_timeout_seconds,
            model_text=model_text,
            program=program,
            agent=self.spec.name,
        )
        self.emit("approval_decided", tool=tool, detail=f"{record.outcome} {record.approver}".strip())
        if record.outcome == "approved":
            self.emit("tool_call", tool=tool, detail=arguments[:500])
            return None
        return ToolCallResult(call_id=call_id, name=tool, content=rejection_message(record), is_error=True)

    def after_violation(
        self,
        index: int,
        ladder: ViolationLadder,
        response: LLMResponse,
        history: list[Message],
        accepted: int,
        note: str | None = None,
    ) -> list[Message] | None:
        """Take the next rung after a violated answer.

        Returns the history for the next attempt (``accepted`` is where a fallback
        model restarts; ``note``, the effects already taken, is added for either),
        or None when the run ended on its declared default (the history then ends
        with the default as the answer). Raises the typed failure when no rung is left.
        """
        self.result.violations.extend(response.violations)
        decision = ladder.step(response.violations)
        if decision.rung is Rung.fail:
            raise violation_error(decision.reason)
        if decision.rung is not Rung.reprompt:
            self.result.degradations.append(decision.degradation(index))
        following = retry_history(decision, history, history[:accepted], response.message, response.violations, note)
        if following is not None:
            return self.advance(following)
        assert ladder.default is not None
        self.result.status = "completed_with_default"
        self.result.output = ladder.default.value
        self.advance([*history, Message(role="assistant", content=json.dumps(self.result.output))])
        return None

    def finish(
        self, history: list[Message], model: str, output: object, *, repl: ReplMemory | None = None
    ) -> AgentResult:
        """The run completed: ``history`` ends with the answer; a code-mode turn leaves its new ``repl``."""
        self.advance(history)
        if repl is not None:
            self.progress.repl = repl
        self.result.status = "completed"
        self.result.model = model
        self.result.output = output
        return self.result

    def record_step(
        self,
        index: int,
        kind: str,
        response: LLMResponse,
        records: list[ToolCallRecord],
        started: datetime,
        *,
        program: str | None = None,
        ended: datetime | None = None,
    ) -> None:
        """``ended``: when the step's own work ended, when not now (the next step's model call was made after it,
        inside its tool's activity)."""
        seconds = ((ended or workflow.now()) - started).total_seconds()
        self.result.steps.append(
            Step(
                index=index,
                kind=kind,  # type: ignore[arg-type]
                model=response.model,
                content=response.message.content,
                tool_calls=records,
                usage=response.usage,
                violations=response.violations,
                context=response.context,
                started_at=started,
                seconds=seconds,
                cost_usd=response.cost_usd,
                program=program[:PROGRAM_KEPT] if program else None,
            )
        )
        workflow_metrics.record_step(self.config.mode, seconds)
        if self.config.on_event is not None:
            # The completed answer is authoritative: its length and digest let a reader prove (or correct) the
            # text it was streamed. Pure, in memory: no command.
            text = response.message.content or ""
            self.emit("step", step=index, detail=kind, text_chars=len(text), text_digest=text_digest(text))
        self.emit("usage", step=index, usage=self.result.usage)


def seconds_since(started: datetime) -> float:
    return (workflow.now() - started).total_seconds()


__all__ = ["AgentRun", "seconds_since"]
