"""One agent run's bookkeeping, shared by the tool loop and code mode.

``AgentRun`` is what a loop talks to: the run's result, its cancel flag, the
contracted model call (token budget included), step records and the
violation ladder's effects on the result. The workflow class only owns it and
answers queries from it, so a loop never needs the workflow object, and a
later loop (multi-turn sessions) can reuse it as is.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        AgentResult,
        AgentSpec,
        AgentState,
        LLMRequest,
        LLMResponse,
        Message,
        Step,
        ToolCallRecord,
        ToolCallResult,
        ToolSchema,
    )
    from ..contracts.code.program import ReplMemory
    from ..contracts.llm.reprompt import reprompt_messages
    from ..contracts.llm.tokens import prompt_tokens_upper_bound
    from ..contracts.llm.request import TokenStream
    from ..contracts.names import EFFECTS_PATCH, TOKEN_STREAM_PATCH
    from ..telemetry import workflow_metrics
    from .calls import call_llm, call_tool
    from ..contracts.approvals import rejection_message
    from ..contracts.session import ProgressEvent, ProgressKind
    from .approvals import ApprovalDesk
    from .conversation import ConversationChain
    from .effects import EffectLedger, run_chain, with_note
    from .ladder import Rung, ViolationLadder, violation_error


class BudgetRefused(Exception):
    """A model call that would not fit the token budget with every call in flight; nothing was sent."""


class AgentRun:
    def __init__(self) -> None:
        self.result = AgentResult(status="running")
        self.cancel_requested = False
        self.mode = "tools"
        self.model = ""
        self.history: list[Message] = []
        """The conversation as the loop left it: the final answer last when the run completed."""
        self.scope = ""
        """Prefix of every step index in idempotency and program keys; a session sets ``t<turn>.``."""
        self.repl: ReplMemory | None = None
        """Code-mode sessions: the REPL state programs run in; a completed turn leaves the new one here."""
        self.approvals = ApprovalDesk()
        """A session hands every turn its own desk, so decisions outlive the turn."""
        self.tools: dict[str, ToolSchema] = {}
        self.asking: tuple[str, str] = ("", "")
        """(the model's text, the program) of the step whose calls run now: shown to an approver."""
        self.turn = 0
        self.on_event: Callable[[ProgressEvent], None] | None = None
        """Sessions: where progress events go (the session's stream); a one-shot run has none."""
        self.chain: ConversationChain | None = None
        """The conversation lives in the payload store (every session turn; a one-shot run since
        ``CONVERSATION_REF_PATCH``) and each step sends only what came after the stored prefix."""
        self.stream_tokens = False
        """Sessions with ``stream_tokens``: loop steps ask ``llm.call`` to stream the answer's text."""
        self._spec: AgentSpec | None = None
        self._reserved = 0
        self.effects_once = False
        self.effects: EffectLedger | None = None

    def begin(self, spec: AgentSpec, *, scope: str = "") -> None:
        self._spec = spec
        self.mode = spec.mode
        self.result.mode = spec.mode
        self.scope = scope
        # Evaluated once, before the first command: a run recorded without the
        # marker replays (and goes on) with the commands it was recorded with.
        self.effects_once = workflow.patched(EFFECTS_PATCH)
        if self.effects_once:
            self.effects = EffectLedger(run_chain(), self.result.effects)

    @property
    def spec(self) -> AgentSpec:
        assert self._spec is not None, "begin() first"
        return self._spec

    def emit(self, kind: ProgressKind, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(ProgressEvent(kind=kind, turn=self.turn, at=workflow.now(), **fields))

    def ladder(self) -> ViolationLadder:
        spec = self.spec
        return ViolationLadder([spec.model, *spec.fallback_models], spec.reprompt_budget, spec.default_result)

    def state(self) -> AgentState:
        last = self.result.steps[-1].kind if self.result.steps else None
        return AgentState(
            status=self.result.status,
            step=len(self.result.steps),
            model=self.model,
            usage=self.result.usage,
            violations=len(self.result.violations),
            degradations=len(self.result.degradations),
            last_step=last,
            mode=self.result.mode,
        )

    def cancelled(self) -> bool:
        """True (and the result says so) once a cancel arrived; checked before each step."""
        if self.cancel_requested:
            self.result.status = "cancelled"
        return self.cancel_requested

    async def call_llm(self, request: LLMRequest, *, refusable: bool = False, standalone: bool = False) -> LLMResponse:
        """One contracted LLM call; every model call of the run goes here, so one token budget holds.

        Each call reserves its ``max_tokens`` before it starts and carries what
        the budget has left (``token_allowance``), which the ``llm.call``
        precondition checks against its prompt + ``max_tokens`` before anything is
        sent. A concurrent call (a program's ``llm()``, whose prompt is short) also
        reserves a bound on its prompt, so calls in flight cannot overshoot the
        budget together. A call that does not fit raises ``BudgetExceededError``,
        or ``BudgetRefused`` when ``refusable`` (the caller answers it another way).

        A loop step's request carries the run's history (in a session, the tail
        of a stored conversation, see ``ConversationChain``); a ``standalone`` one
        (a program's ``llm()``) has its own messages and never joins the chain.
        """
        self.model = request.config.model
        spec = self.spec
        if spec.context_policy != "none" and not standalone:
            request = request.model_copy(update={"context_policy": spec.context_policy})
        if self.stream_tokens and not standalone and workflow.patched(TOKEN_STREAM_PATCH):
            request = request.model_copy(update={"stream": TokenStream(turn=self.turn, step=len(self.result.steps))})
        chain = None if standalone else self.chain
        if not self.effects_once:
            sent = chain.request(request) if chain is not None else request
            response = await call_llm(sent, spec.llm_policy, self.result, token_budget=spec.token_budget)
        else:
            response = await self._reserved_call(request, chain, refusable)
        if chain is not None and response.conversation is not None:
            chain.learn(request.messages, response.conversation)
        self.result.cost_usd += response.cost_usd
        return response

    async def _reserved_call(
        self, request: LLMRequest, chain: ConversationChain | None, refusable: bool
    ) -> LLMResponse:
        spec = self.spec
        used = self.result.usage.total_tokens
        allowance = spec.token_budget - used - self._reserved
        # The byte bound is linear in the prompt; only the short concurrent prompts pay it here.
        reserve = request.config.max_tokens + (prompt_tokens_upper_bound(request) if refusable else 0)
        if reserve > allowance:
            message = (
                f"token budget: {used} used + {self._reserved} reserved by calls in flight + {reserve} for this call "
                f"> {spec.token_budget}"
            )
            if refusable:
                raise BudgetRefused(message)
            raise ApplicationError(message, type="BudgetExceededError", non_retryable=True)
        self._reserved += reserve
        sent = request.model_copy(update={"token_allowance": allowance})
        try:
            return await call_llm(
                chain.request(sent) if chain is not None else sent,
                spec.llm_policy,
                self.result,
                token_budget=spec.token_budget,
            )
        except ActivityError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == "BudgetExceededError":
                # The run fails (or the program's llm() is refused) as it would had the workflow seen it first.
                if refusable:
                    raise BudgetRefused(cause.message) from None
                raise ApplicationError(cause.message, type="BudgetExceededError", non_retryable=True) from None
            raise
        finally:
            self._reserved -= reserve

    async def call_tool(
        self, schema: ToolSchema | None, name: str, arguments: str, *, call_id: str, scope: str, legacy_key: str
    ) -> ToolCallResult:
        """One tool call under the run's effect keys; a repeat of a completed effect is answered from the record.

        ``scope`` is prefixed with the run's own (a session's turn), so equal calls in two turns are two effects.
        """
        policy = self.spec.tool_policy
        if self.effects is None:
            return await call_tool(name, arguments, call_id=call_id, key=legacy_key, policy=policy)
        key = self.effects.key(self.scope + scope, name, arguments)  # before any await: ordinals follow call order
        effectful = schema is not None and schema.side_effects
        if effectful:
            done = self.effects.completed(key, call_id)
            if done is not None:
                return done
        result = await call_tool(
            name, arguments, call_id=call_id, key=key, policy=policy, delivery=schema.delivery if schema else None
        )
        if effectful:
            self.effects.record(key, name, arguments, result)
        return result

    def effects_note(self, python_name: Callable[[str], str] = str) -> str | None:
        return self.effects.note(python_name) if self.effects is not None else None

    async def rejection(self, approval_id: str, call_id: str, tool: str, arguments: str) -> ToolCallResult | None:
        """None when the call may run now; otherwise the tool error the model reads (rejected or timed out).

        A tool that requires approval waits here for the ``approve`` / ``reject`` Update.
        """
        schema = self.tools.get(tool)
        if schema is None or not ApprovalDesk.required(schema):
            self.emit("tool_call", tool=tool, detail=arguments[:500])
            return None
        text, program = self.asking
        record = await self.approvals.gate(
            approval_id, schema, arguments, self.spec.approval_timeout_seconds, model_text=text, program=program
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
        model restarts; ``note``, the effects already taken, is added for either), or None when the run ended on its declared default.
        Raises the typed failure when no rung is left.
        """
        self.result.violations.extend(response.violations)
        decision = ladder.step(response.violations)
        if decision.rung is Rung.reprompt:
            return [*history, *with_note(reprompt_messages(response.message, response.violations), note)]
        if decision.rung is Rung.fail:
            raise violation_error(decision.reason)
        self.result.degradations.append(decision.degradation(index))
        if decision.rung is Rung.fallback:
            return with_note(history[:accepted], note)
        assert ladder.default is not None
        self.result.status = "completed_with_default"
        self.result.output = ladder.default.value
        return None

    def finish(self, model: str, output: object) -> AgentResult:
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
    ) -> None:
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
                seconds=seconds_since(started),
                cost_usd=response.cost_usd,
            )
        )
        workflow_metrics.record_step(self.mode, seconds_since(started))
        self.emit("step", step=index, detail=kind)
        self.emit("usage", step=index, usage=self.result.usage)


def seconds_since(started: datetime) -> float:
    return (workflow.now() - started).total_seconds()


__all__ = ["AgentRun", "seconds_since"]
