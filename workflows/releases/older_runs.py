"""What an agent run recorded before a patch does where today's path does something else.

Each function is one old branch, under the patch id whose absence selects it;
``AgentRun`` calls it where its ``Features`` (``gates.py``) say the run
predates that id, so the agent run reads as today's behaviour. These
functions issue exactly the commands those runs issued when they ran: they are
what their recorded histories (``registry.py``: ``old_branch``) replay. When an
id goes (``registry.py``: ``may_go``), its functions here go with it.

Deterministic: each function only schedules what the old build scheduled.
"""

from __future__ import annotations

from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ...contracts import AgentResult, AgentSpec, LLMRequest, LLMResponse, ToolCallResult
    from ...contracts.persisted_ids import run_call_key
    from ..calls import call_llm, call_tool


class AgentRunView(Protocol):
    """What an old branch uses of ``agent_run.AgentRun`` (which imports this module, so not it)."""

    @property
    def spec(self) -> AgentSpec: ...

    @property
    def result(self) -> AgentResult: ...

    async def rejection(
        self, approval_id: str, call_id: str, tool: str, arguments: str, *, model_text: str = "", program: str = ""
    ) -> ToolCallResult | None: ...


# ---------------------------------------------------------------- before EFFECTS_PATCH (issue 13)
# No effect ledger: a tool call is keyed by the run id (a reset or a retried run called it again), never
# answered from a record, and a model call reserves no tokens.


def run_id_key(approval_id: str) -> str:
    """The idempotency key of a tool call before effect keys: the run id and the step's call id (which is
    also the call's approval id: ``<scope><step>:<call>`` in tool mode, ``<scope>p<step>-<call>`` in code mode)."""
    return run_call_key(workflow.info().run_id, approval_id)


async def call_tool_keyed_by_run(
    run: AgentRunView,
    name: str,
    arguments: str,
    *,
    call_id: str,
    approval_id: str,
    model_text: str,
    program: str,
) -> ToolCallResult:
    """The call after its approval (if the run asks one), with no delivery policy and nothing stored."""
    rejected = await run.rejection(approval_id, call_id, name, arguments, model_text=model_text, program=program)
    if rejected is not None:
        return rejected
    return await call_tool(name, arguments, call_id=call_id, key=run_id_key(approval_id), policy=run.spec.tool_policy)


async def call_llm_unreserved(run: AgentRunView, sent: LLMRequest) -> LLMResponse:
    """The model call with no token reservation: the budget is checked only after it returned."""
    return await call_llm(sent, run.spec.llm_policy, run.result, token_budget=run.spec.token_budget)


# ---------------------------------------------------------------- before EXACTLY_ONCE_PATCH (issue 22)


async def answer_from_record_after_approval(
    run: AgentRunView,
    done: ToolCallResult,
    *,
    approval_id: str,
    call_id: str,
    name: str,
    arguments: str,
    model_text: str,
    program: str,
) -> ToolCallResult:
    """A recorded call to a tool that requires approval came up again: the approver is asked again, and only
    an approval gets the recorded result (a rejection tells the model the call did not run)."""
    rejected = await run.rejection(approval_id, call_id, name, arguments, model_text=model_text, program=program)
    return rejected if rejected is not None else done


__all__ = ["answer_from_record_after_approval", "call_llm_unreserved", "call_tool_keyed_by_run", "run_id_key"]
