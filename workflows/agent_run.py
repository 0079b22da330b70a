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
    from ..telemetry import workflow_metrics
    from . import calls
    from ..contracts.approvals import rejection_message
    from ..contracts.session import ProgressEvent, ProgressKind
    from .approvals import ApprovalDesk
    from .conversation import ConversationChain
    from .ladder import Rung, ViolationLadder, violation_error


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
        self.turn = 0
        self.on_event: Callable[[ProgressEvent], None] | None = None
        """Sessions: where progress events go (the session's stream); a one-shot run has none."""
        self.chain: ConversationChain | None = None
        """Sessions: the conversation lives in the payload store and ``history`` is only its tail."""
        self._spec: AgentSpec | None = None

    def begin(self, spec: AgentSpec, *, scope: str = "") -> None:
        self._spec = spec
        self.mode = spec.mode
        self.scope = scope

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
        )

    def cancelled(self) -> bool:
        """True (and the result says so) once a cancel arrived; checked before each step."""
        if self.cancel_requested:
            self.result.status = "cancelled"
        return self.cancel_requested

    async def call_llm(self, request: LLMRequest, *, standalone: bool = False) -> LLMResponse:
        """One contracted LLM call; every model call of the run goes here, so one token budget holds.

        A loop step's request carries the run's history; a ``standalone`` one
        (a program's ``llm()``) has its own messages and never joins the chain.
        """
        self.model = request.config.model
        spec = self.spec
        if spec.context_policy != "none" and not standalone:
            request = request.model_copy(update={"context_policy": spec.context_policy})
        chain = None if standalone else self.chain
        sent = chain.request(request) if chain is not None else request
        response = await calls.call_llm(sent, spec.llm_policy, self.result, token_budget=spec.token_budget)
        if chain is not None and response.conversation is not None:
            chain.learn(request.messages, response.conversation)
        return response

    async def rejection(self, approval_id: str, call_id: str, tool: str, arguments: str) -> ToolCallResult | None:
        """None when the call may run now; otherwise the tool error the model reads (rejected or timed out).

        A tool that requires approval waits here for the ``approve`` / ``reject`` Update.
        """
        schema = self.tools.get(tool)
        if schema is None or not ApprovalDesk.required(schema):
            self.emit("tool_call", tool=tool, detail=arguments[:500])
            return None
        record = await self.approvals.gate(approval_id, schema, arguments, self.spec.approval_timeout_seconds)
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
    ) -> list[Message] | None:
        """Take the next rung after a violated answer.

        Returns the history for the next attempt (``accepted`` is where a fallback
        model restarts), or None when the run ended on its declared default.
        Raises the typed failure when no rung is left.
        """
        self.result.violations.extend(response.violations)
        decision = ladder.step(response.violations)
        if decision.rung is Rung.reprompt:
            return [*history, *reprompt_messages(response.message, response.violations)]
        if decision.rung is Rung.fail:
            raise violation_error(decision.reason)
        self.result.degradations.append(decision.degradation(index))
        if decision.rung is Rung.fallback:
            return history[:accepted]
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
            )
        )
        workflow_metrics.record_step(self.mode, seconds_since(started))
        self.emit("step", step=index, detail=kind)
        self.emit("usage", step=index, usage=self.result.usage)


def seconds_since(started: datetime) -> float:
    return (workflow.now() - started).total_seconds()


__all__ = ["AgentRun", "seconds_since"]
