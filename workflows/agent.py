"""AgentWorkflow: one agent run, one loop iteration per step (H, S) -> (H', S').

The one-shot API: one input, one answer. The loop itself (tool loop or code
mode) is ``steps.run_steps``, the same one every session turn runs, and like a
turn it keeps the conversation in the payload store (``ConversationChain``):
each ``llm.call`` carries the stored prefix's ref and the new messages only.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import AgentInput, AgentResult, AgentState, Message, Step
    from ..contracts.approvals import ApprovalRecord, PendingApproval
    from ..contracts.names import (
        AGENT_WORKFLOW,
        APPROVALS_QUERY,
        APPROVE_UPDATE,
        CANCEL_SIGNAL,
        CONVERSATION_REF_PATCH,
        REJECT_UPDATE,
        STATE_QUERY,
        STEPS_QUERY,
    )
    from ..telemetry import workflow_metrics
    from .agent_run import AgentRun, seconds_since
    from .conversation import ConversationChain
    from .steps import opening, run_steps, spec_tools
    from .visibility import Visibility


@workflow.defn(name=AGENT_WORKFLOW)
class AgentWorkflow:
    def __init__(self) -> None:
        self.run_state = AgentRun()
        self.visibility = Visibility()
        self.run_state.approvals.on_change = self.visibility.awaiting

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        started = workflow.now()
        result = self.run_state.result
        try:
            result = await self._run(inp)
        except BaseException as exc:
            result.status = "failed"
            self._totals(result)
            if workflow_metrics.fails_the_run(exc):
                reason = workflow_metrics.failure_reason(exc)
                workflow_metrics.record_run("failed", seconds_since(started), len(result.steps), reason)
            raise
        workflow_metrics.record_run(result.status, seconds_since(started), len(result.steps))
        self._totals(result)
        return result

    def _totals(self, result: AgentResult) -> None:
        result.approvals = self.run_state.approvals.recent()
        self.visibility.totals(
            steps=len(result.steps), usage=result.usage, violations=len(result.violations),
            cost_usd=result.cost_usd, model=result.model or self.run_state.model,
        )

    @workflow.query(name=STATE_QUERY)
    def state(self) -> AgentState:
        return self.run_state.state()

    @workflow.query(name=STEPS_QUERY)
    def steps(self, since: int = 0) -> list[Step]:
        """Steps from index ``since`` on, so a follower fetches each step once."""
        return self.run_state.result.steps[since:]

    @workflow.update(name=APPROVE_UPDATE)
    def approve(self, decision: Any) -> ApprovalRecord:
        return self.run_state.approvals.decide(decision, "approved")

    @approve.validator
    def _check_approve(self, decision: Any) -> None:
        self.run_state.approvals.check(decision)

    @workflow.update(name=REJECT_UPDATE)
    def reject(self, decision: Any) -> ApprovalRecord:
        return self.run_state.approvals.decide(decision, "rejected")

    @reject.validator
    def _check_reject(self, decision: Any) -> None:
        self.run_state.approvals.check(decision)

    @workflow.query(name=APPROVALS_QUERY)
    def approvals(self) -> list[PendingApproval]:
        return list(self.run_state.approvals.pending.values())

    @workflow.signal(name=CANCEL_SIGNAL)
    def cancel(self) -> None:
        """Graceful: the run stops before its next step and returns what it has."""
        self.run_state.cancel_requested = True

    async def _run(self, inp: AgentInput) -> AgentResult:
        spec = inp.spec
        self.visibility.start(spec)
        self.run_state.begin(spec)
        # The conversation goes to the payload store as a session's does, so a step's llm.call carries
        # only what the step added: history per step stops growing with the run. Asked before the
        # first command; runs recorded without the marker replay sending the whole history.
        if workflow.patched(CONVERSATION_REF_PATCH):
            self.run_state.chain = ConversationChain(None)
        tools = await spec_tools(spec)
        return await run_steps(self.run_state, [opening(spec, tools), Message.user(inp.input)], tools)
