"""AgentWorkflow: one agent run, one loop iteration per step (H, S) -> (H', S').

Each step's LLM call is the ``llm.call`` activity; the tools it asks for run as
``tools.call`` activities, concurrently. Violations come back as values and go
down the declared ladder: re-prompt, next model, default result, typed failure.
"""

from __future__ import annotations

import asyncio
import json

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        AgentInput,
        AgentResult,
        AgentSpec,
        AgentState,
        LLMRequest,
        LLMResponse,
        Message,
        ResponseFormat,
        Step,
        ToolCallRecord,
        ToolCallResult,
        ToolSchema,
    )
    from ..contracts.names import AGENT_WORKFLOW, CANCEL_SIGNAL, PATCH_TOOL_RESULT_CAP, STATE_QUERY, STEPS_QUERY
    from ..contracts.llm.tools import capped_tool_content
    from ..contracts.llm.preconditions import check_spec
    from ..telemetry import workflow_metrics
    from .calls import describe_tools
    from .agent_run import AgentRun, seconds_since
    from .code_mode import run_code_mode


@workflow.defn(name=AGENT_WORKFLOW)
class AgentWorkflow:
    def __init__(self) -> None:
        self.run_state = AgentRun()

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        started = workflow.now()
        result = self.run_state.result
        try:
            result = await self._run(inp)
        except BaseException:
            result.status = "failed"
            workflow_metrics.record_run("failed", seconds_since(started), len(result.steps))
            raise
        workflow_metrics.record_run(result.status, seconds_since(started), len(result.steps))
        return result

    @workflow.query(name=STATE_QUERY)
    def state(self) -> AgentState:
        return self.run_state.state()

    @workflow.query(name=STEPS_QUERY)
    def steps(self, since: int = 0) -> list[Step]:
        """Steps from index ``since`` on, so a follower fetches each step once."""
        return self.run_state.result.steps[since:]

    @workflow.signal(name=CANCEL_SIGNAL)
    def cancel(self) -> None:
        """Graceful: the run stops before its next step and returns what it has."""
        self.run_state.cancel_requested = True

    async def _run(self, inp: AgentInput) -> AgentResult:
        spec = inp.spec
        self.run_state.begin(spec)
        tools = await describe_tools(spec.tools, spec.tool_policy) if spec.tools else []
        _reject_invalid_spec(spec, tools)
        if spec.mode == "code":
            return await run_code_mode(self.run_state, inp, tools)
        return await _tool_loop(self.run_state, inp, tools)


async def _tool_loop(run: AgentRun, inp: AgentInput, tools: list[ToolSchema]) -> AgentResult:
    spec = inp.spec
    ladder = run.ladder()
    history = [Message.system(spec.system_prompt), Message.user(inp.input)]
    accepted = len(history)  # history before this attempt; a fallback model restarts here
    response_format = ResponseFormat(json_schema=spec.output_schema) if spec.output_schema else None

    for index in range(spec.max_steps):
        if run.cancelled():
            return run.result
        step_started = workflow.now()
        request = LLMRequest(
            config=ladder.current,
            messages=history,
            tools=tools,
            response_format=response_format,
            allowed_model_aliases=spec.allowed_model_aliases,
        )
        response = await run.call_llm(request)

        if response.violations:
            run.record_step(index, "assistant", response, [], step_started)
            next_history = run.after_violation(index, ladder, response, history, accepted)
            if next_history is None:
                return run.result
            history = next_history
            continue

        ladder.accepted()
        if response.message.tool_calls:
            results = await _run_tools(run, tools, index, response)
            records = [
                ToolCallRecord(
                    call_id=r.call_id, name=r.name, arguments=c.arguments, content=r.content, is_error=r.is_error
                )
                for c, r in zip(response.message.tool_calls, results)
            ]
            run.record_step(index, "tool_call", response, records, step_started)
            # A huge result would overflow the context precondition and end the run; cut it visibly instead.
            cap = spec.tool_result_chars if workflow.patched(PATCH_TOOL_RESULT_CAP) else None
            history = [*history, response.message, *(_tool_message(r, cap) for r in results)]
            accepted = len(history)
            continue

        run.record_step(index, "final", response, [], step_started)
        return run.finish(response.model or ladder.current.model, _final_output(response, spec))

    raise ApplicationError(
        f"the run used all {spec.max_steps} steps without a final answer",
        type="BudgetExceededError",
        non_retryable=True,
    )


async def _run_tools(run: AgentRun, tools: list[ToolSchema], index: int, response: LLMResponse) -> list[ToolCallResult]:
    run_id = workflow.info().run_id
    by_name = {t.name: t for t in tools}
    # The logical step: tool steps taken so far. A re-prompted answer (violations) runs no tool,
    # so its retry has the same scope, and identical calls in it the same keys.
    scope = f"step-{sum(1 for s in run.result.steps if s.kind == 'tool_call')}"
    return await asyncio.gather(
        *(
            run.call_tool(
                by_name.get(call.name), call.name, call.arguments, call_id=call.id, scope=scope,
                legacy_key=f"{run_id}:{index}:{call.id}",
            )
            for call in response.message.tool_calls
        )
    )


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


def _tool_message(result: ToolCallResult, cap: int | None) -> Message:
    content = result.content if cap is None else capped_tool_content(result.content, cap)
    return Message(role="tool", tool_call_id=result.call_id, name=result.name, content=content, is_error=result.is_error)


def _final_output(response: LLMResponse, spec: AgentSpec) -> object:
    content = response.message.content or ""
    # The postcondition already proved it parses and validates.
    return json.loads(content) if spec.output_schema else content
