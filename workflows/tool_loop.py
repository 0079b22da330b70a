"""The tool loop: one step per LLM call, the tools it asks for run concurrently.

Each step's LLM call is the ``llm.call`` activity; the tools it asks for run as
``tools.call`` activities. Violations come back as values and go down the
declared ladder: re-prompt, next model, default result, typed failure.
Called through ``steps.run_steps`` by both ``AgentWorkflow`` (one input) and
``SessionWorkflow`` (one turn of a conversation).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        AgentResult,
        AgentSpec,
        LLMRequest,
        LLMResponse,
        LLMToolCall,
        Message,
        ResponseFormat,
        ToolCallRecord,
        ToolCallResult,
    )
    from ..contracts.code.carried import carried_answer
    from ..contracts.llm.next_call import NextModelCall
    from ..contracts.llm.tools import tool_message
    from ..contracts.persisted_ids import step_call_id, step_scope
    from .agent_run import AgentRun
    from .calls import budget_exceeded
    from .siblings import together


async def run_tool_loop(run: AgentRun, history: list[Message]) -> AgentResult:
    """Run steps from ``history`` (ending with the user's message) to a final answer."""
    spec = run.spec
    ladder = run.ladder()
    accepted = len(history)  # history before this attempt; a fallback model restarts here
    response_format = ResponseFormat(json_schema=spec.output_schema) if spec.output_schema else None
    run.advance(history)

    def asking(messages: list[Message]) -> LLMRequest:
        return LLMRequest(
            config=ladder.current,
            messages=messages,
            tools=list(run.tools.schemas),
            response_format=response_format,
            allowed_model_aliases=spec.allowed_model_aliases,
        )

    carried: tuple[LLMResponse, datetime] | None = None  # the answer the last step's tool call brought
    for index in range(spec.max_steps):
        if run.cancelled():
            return run.result
        if carried is not None:
            response, step_started = carried
            carried = None
        else:
            step_started = workflow.now()
            response = await run.call_llm(asking(history))

        if response.violations:
            run.record_step(index, "assistant", response, [], step_started)
            next_history = run.after_violation(index, ladder, response, history, accepted)
            if next_history is None:
                return run.result
            history = next_history
            continue

        ladder.accepted()
        if response.message.tool_calls:
            calls = response.message.tool_calls
            # One call a retry cannot harm carries the next model call (contracts/llm/next_call.py).
            next_call = (
                run.next_call(asking([*history, response.message]), run.tools.schema(calls[0].name))
                if len(calls) == 1 and index + 1 < spec.max_steps
                else None
            )
            with run.reserving(next_call):
                results = await _run_tools(run, index, response, next_call)
            records = [
                ToolCallRecord(
                    call_id=r.call_id, name=r.name, arguments=c.arguments, content=r.content, is_error=r.is_error
                )
                for c, r in zip(calls, results)
            ]
            answer = carried_answer(results[0]) if next_call is not None else None
            now = workflow.now()
            model_began = now - timedelta(seconds=answer.seconds) if answer is not None else now
            run.record_step(index, "tool_call", response, records, step_started, ended=model_began)
            # A huge result would overflow the context precondition and end the run; cut it visibly instead.
            cap = run.tool_result_cap()
            history = run.advance([*history, response.message, *(_tool_message(run, r, cap) for r in results)])
            accepted = len(history)
            if next_call is not None:
                following = run.took_next(next_call, history, answer)
                carried = (following, model_began) if following is not None else None
            continue

        run.record_step(index, "final", response, [], step_started)
        return run.finish(
            [*history, response.message], response.model or ladder.current.model, _final_output(response, spec)
        )

    raise budget_exceeded(f"the run used all {spec.max_steps} steps without a final answer")


async def _run_tools(
    run: AgentRun, index: int, response: LLMResponse, next_call: NextModelCall | None
) -> list[ToolCallResult]:
    # The logical step: tool steps taken so far. A re-prompted answer (violations) runs no tool,
    # so its retry has the same scope, and identical calls in it the same keys.
    scope = step_scope(sum(1 for s in run.result.steps if s.kind == "tool_call"))

    async def one(call: LLMToolCall) -> ToolCallResult:
        step_call = step_call_id(run.scope, index, call.id)
        return await run.call_tool(
            run.tools.schema(call.name),
            call.name,
            call.arguments,
            call_id=call.id,
            scope=scope,
            approval_id=step_call,
            model_text=response.message.content or "",
            for_model=True,
            next_call=next_call,
        )

    # Effect keys are taken before any await inside call_tool (approvals included): ordinals follow call order.
    return await together((one(call) for call in response.message.tool_calls), run.features.cancel_siblings)


def _tool_message(run: AgentRun, result: ToolCallResult, cap: int | None) -> Message:
    message = tool_message(result, cap)
    if result.message_ref is not None and run.config.chain is not None:
        run.config.chain.remember_message(message, result.message_ref)  # the next llm.call names it
    return message


def _final_output(response: LLMResponse, spec: AgentSpec) -> object:
    content = response.message.content or ""
    # The postcondition already proved it parses and validates.
    return json.loads(content) if spec.output_schema else content


__all__ = ["run_tool_loop"]
