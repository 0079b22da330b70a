"""AgentWorkflow: one agent run, one loop iteration per step (H, S) -> (H', S').

Each step's LLM call is the ``llm.call`` activity; the tools it asks for run as
``tools.call`` activities, concurrently. Violations come back as values and go
down the declared ladder: re-prompt, next model, default result, typed failure.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        AgentInput,
        AgentResult,
        AgentSpec,
        AgentState,
        Degradation,
        LLMRequest,
        LLMResponse,
        Message,
        ResponseFormat,
        Step,
        ToolCallInput,
        ToolCallRecord,
        ToolCallResult,
        ToolSchema,
        Violation,
    )
    from ..contracts.llm.preconditions import check_spec
    from ..contracts.llm.reprompt import reprompt_messages
    from ..contracts.llm.tools import ToolsDescribeInput
    from ..telemetry import workflow_metrics
    from .activity_options import activity_options
    from .code_mode import run_code_mode
    from .degradation import Decision, ModelLadder

WORKFLOW_NAME = "AgentWorkflow"


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    def __init__(self) -> None:
        self.result = AgentResult(status="running")
        self.cancel_requested = False
        self._mode = "tools"
        self._model = ""

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        started = workflow.now()
        try:
            result = await self._run(inp)
        except BaseException:
            self.result.status = "failed"
            workflow_metrics.record_run("failed", _seconds_since(started), len(self.result.steps))
            raise
        workflow_metrics.record_run(result.status, _seconds_since(started), len(result.steps))
        return result

    @workflow.query(name="state")
    def state(self) -> AgentState:
        last = self.result.steps[-1].kind if self.result.steps else None
        return AgentState(
            status=self.result.status,
            step=len(self.result.steps),
            model=self._model,
            usage=self.result.usage,
            violations=len(self.result.violations),
            degradations=len(self.result.degradations),
            last_step=last,
        )

    @workflow.query(name="steps")
    def steps(self, since: int = 0) -> list[Step]:
        """Steps from index ``since`` on, so a follower fetches each step once."""
        return self.result.steps[since:]

    @workflow.signal(name="cancel")
    def cancel(self) -> None:
        """Graceful: the run stops before its next step and returns what it has."""
        self.cancel_requested = True

    async def _run(self, inp: AgentInput) -> AgentResult:
        spec = inp.spec
        self._mode = spec.mode
        tools = await self._describe_tools(spec)
        _reject_invalid_spec(spec, tools)
        if spec.mode == "code":
            return await run_code_mode(self, inp, tools)
        return await self._tool_loop(inp, tools)

    async def _describe_tools(self, spec: AgentSpec) -> list[ToolSchema]:
        if not spec.tools:
            return []
        return await workflow.execute_activity(
            "tools.describe",
            ToolsDescribeInput(names=spec.tools),
            result_type=list[ToolSchema],
            **activity_options(spec.tool_policy),
        )

    async def _tool_loop(self, inp: AgentInput, tools: list[ToolSchema]) -> AgentResult:
        spec = inp.spec
        ladder = ModelLadder(spec)
        history = [Message.system(spec.system_prompt), Message.user(inp.input)]
        accepted = len(history)  # history before this attempt; a fallback model restarts here
        response_format = ResponseFormat(json_schema=spec.output_schema) if spec.output_schema else None

        for index in range(spec.max_steps):
            if self.cancel_requested:
                self.result.status = "cancelled"
                return self.result
            step_started = workflow.now()
            request = LLMRequest(
                config=ladder.current,
                messages=history,
                tools=tools,
                response_format=response_format,
                allowed_model_aliases=spec.allowed_model_aliases,
            )
            response = await self.call_llm(spec, request)

            if response.violations:
                self.record_step(index, "assistant", response, [], step_started)
                next_history = self.after_violation(spec, index, ladder, response, history, accepted)
                if next_history is None:
                    return self.result
                history = next_history
                continue

            if response.message.tool_calls:
                results = await self._run_tools(spec, index, response)
                records = [
                    ToolCallRecord(
                        call_id=r.call_id, name=r.name, arguments=c.arguments, content=r.content, is_error=r.is_error
                    )
                    for c, r in zip(response.message.tool_calls, results)
                ]
                self.record_step(index, "tool_call", response, records, step_started)
                history = [*history, response.message, *(_tool_message(r) for r in results)]
                accepted = len(history)
                continue

            self.record_step(index, "final", response, [], step_started)
            self.result.status = "completed"
            self.result.model = response.model or ladder.current.model
            self.result.output = _final_output(response, spec)
            return self.result

        raise ApplicationError(
            f"the run used all {spec.max_steps} steps without a final answer",
            type="BudgetExceededError",
            non_retryable=True,
        )

    async def call_llm(self, spec: AgentSpec, request: LLMRequest) -> LLMResponse:
        """One contracted LLM call; shared with code mode so budgets and bookkeeping agree."""
        self._model = request.config.model
        response = await workflow.execute_activity(
            "llm.call",
            request,
            result_type=LLMResponse,
            summary=f"chat {request.config.model}",
            **activity_options(spec.llm_policy),
        )
        self.result.usage = self.result.usage + response.usage.billable()
        if self.result.usage.total_tokens > spec.token_budget:
            raise ApplicationError(
                f"token budget exceeded: {self.result.usage.total_tokens} > {spec.token_budget}",
                type="BudgetExceededError",
                non_retryable=True,
            )
        return response

    def after_violation(
        self,
        spec: AgentSpec,
        index: int,
        ladder: ModelLadder,
        response: LLMResponse,
        history: list[Message],
        accepted: int,
    ) -> list[Message] | None:
        """Take the next rung after a violated answer; shared with code mode.

        Returns the history for the next attempt (``accepted`` is where a fallback
        model restarts), or None when the run ended on its declared default.
        Raises the typed failure when no rung is left.
        """
        decision = self._handle_violations(index, ladder, response)
        if decision is Decision.reprompt:
            return [*history, *reprompt_messages(response.message, response.violations)]
        if decision is Decision.fallback:
            return history[:accepted]
        assert spec.default_result is not None
        self.result.status = "completed_with_default"
        self.result.output = spec.default_result.value
        return None

    def _handle_violations(self, index: int, ladder: ModelLadder, response: LLMResponse) -> Decision:
        self.result.violations.extend(response.violations)
        first = response.violations[0]
        failed_model = ladder.current.model
        decision = ladder.on_violation()
        if decision is Decision.reprompt:
            for v in response.violations:
                workflow_metrics.record_reprompt(v.contract, v.kind.value)
        elif decision is Decision.fallback:
            self._degrade(index, failed_model, ladder.current.model, first, target="fallback")
        elif decision is Decision.default:
            self._degrade(index, failed_model, "default_result", first, target="default")
        else:
            raise ApplicationError(
                f"contract {first.contract!r} violated ({first.kind.value} at {first.path}): {first.message}",
                first.model_dump(mode="json"),
                type="ContractViolationError",
                non_retryable=True,
            )
        return decision

    def _degrade(self, index: int, from_model: str, to: str, reason: Violation, *, target: str) -> None:
        self.result.degradations.append(Degradation(step=index, from_model=from_model, to=to, reason=reason))
        workflow_metrics.record_degradation(reason.kind.value, target)

    async def _run_tools(self, spec: AgentSpec, index: int, response: LLMResponse) -> list[ToolCallResult]:
        info = workflow.info()
        return await asyncio.gather(
            *(
                workflow.execute_activity(
                    "tools.call",
                    ToolCallInput(
                        name=call.name,
                        arguments=call.arguments,
                        call_id=call.id,
                        # Stable across activity retries, worker crashes and replays.
                        idempotency_key=f"{info.run_id}:{index}:{call.id}",
                    ),
                    result_type=ToolCallResult,
                    summary=f"execute_tool {call.name}",
                    **activity_options(spec.tool_policy),
                )
                for call in response.message.tool_calls
            )
        )

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
            )
        )
        workflow_metrics.record_step(self._mode, _seconds_since(started))


def _reject_invalid_spec(spec: AgentSpec, tools: list[ToolSchema]) -> None:
    """A spec that reached the workflow without client-side validation still fails typed."""
    violations = check_spec(spec, {t.name: t for t in tools})
    if violations:
        detail = "; ".join(f"{v.path}: {v.message}" for v in violations)
        raise ApplicationError(
            f"invalid agent spec: {detail}",
            *[v.model_dump(mode="json") for v in violations],
            type="InvalidSpecError",
            non_retryable=True,
        )


def _tool_message(result: ToolCallResult) -> Message:
    return Message(
        role="tool", tool_call_id=result.call_id, name=result.name, content=result.content, is_error=result.is_error
    )


def _final_output(response: LLMResponse, spec: AgentSpec) -> object:
    content = response.message.content or ""
    # The postcondition already proved it parses and validates.
    return json.loads(content) if spec.output_schema else content


def _seconds_since(started: datetime) -> float:
    return (workflow.now() - started).total_seconds()
