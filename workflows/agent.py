"""AgentWorkflow: one agent run, one loop iteration per step (H, S) -> (H', S').

The one-shot API: one input, one answer. The loop itself (tool loop or code
mode) is ``steps.run_steps``, the same one every session turn runs, and like a
turn it keeps the conversation in the payload store (``ConversationChain``):
each ``llm.call`` carries the stored prefix's ref and the new messages only.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from ..contracts import AgentInput, AgentResult, AgentState, Message, Step
    from ..contracts.names import AGENT_WORKFLOW, CANCEL_SIGNAL, STATE_QUERY, STEPS_QUERY
    from ..telemetry import workflow_metrics
    from .agent_run import AgentRun, seconds_since
    from .approvals import ApprovalDesk, ApprovalHandlers
    from .entries import NO_INPUT, start_input
    from .quota_gate import QuotaDesk, QuotaHandlers, worker_plan
    from .releases.gates import Features
    from .run_state import RunProgress
    from .steps import (
        check_fork,
        check_key_scope,
        check_spec_but_tools,
        check_tenant,
        opening,
        python_name,
        resolves_tools_lazily,
        run_steps,
        spec_tools,
    )
    from .visibility import Visibility


@workflow.defn(name=AGENT_WORKFLOW)
class AgentWorkflow(ApprovalHandlers, QuotaHandlers):
    def __init__(self) -> None:
        # Made before the run has its tools: queries, the cancel signal and approval Updates read them from the start.
        self.progress = RunProgress()
        self.approvals = ApprovalDesk()
        self.quotas = QuotaDesk()
        self.visibility = Visibility()
        self.approvals.on_change = self.visibility.awaiting
        self.features: Features | None = None

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> AgentResult:
        inp = start_input(raw, AgentInput)
        started = workflow.now()
        result = self.progress.result
        try:
            result = await self._run(inp)
        except GeneratorExit:
            # The worker evicted this run from its cache and closes its coroutine outside the workflow's
            # event loop: no workflow call (a quota release, a search-attribute upsert) may run there.
            raise
        except BaseException as exc:
            await self.quotas.settle()  # no command unless a call ran under a quota plan
            result.status = "failed"
            self._totals(result)
            if workflow_metrics.fails_the_run(exc):
                reason = workflow_metrics.failure_reason(exc)
                workflow_metrics.record_run("failed", seconds_since(started), len(result.steps), reason)
            raise
        await self.quotas.settle()
        workflow_metrics.record_run(result.status, seconds_since(started), len(result.steps))
        self._totals(result, completed=True)
        return result

    def _totals(self, result: AgentResult, *, completed: bool = False) -> None:
        """The run's decisions into its result, its totals into its search attributes: one upsert, or none
        when the run completed under the release (its result has them; the console reads it)."""
        result.approvals = self.approvals.recent()
        if completed and self.features is not None and self.features.release:
            return
        self.visibility.totals(
            steps=len(result.steps),
            usage=result.usage,
            violations=len(result.violations),
            cost_usd=result.cost_usd,
            model=result.model or self.progress.model,
        )

    @workflow.query(name=STATE_QUERY)
    def state(self) -> AgentState:
        return self.progress.state()

    @workflow.query(name=STEPS_QUERY)
    def steps(self, since: int = 0) -> list[Step]:
        """Steps from index ``since`` on, so a follower fetches each step once."""
        return self.progress.result.steps[since:]

    @workflow.signal(name=CANCEL_SIGNAL)
    def cancel(self, *ignored: Any) -> None:
        """Graceful: the run stops before its next step and returns what it has (arguments are ignored: an
        extra one must not fail the workflow task)."""
        self.progress.request_cancel()

    async def _run(self, inp: AgentInput) -> AgentResult:
        spec = inp.spec
        # Before the first command: whether this run keeps its search attributes (SEARCH_ATTRIBUTES_PATCH),
        # then the features, in the order runs have always asked them.
        check_key_scope(inp.key_scope)
        check_tenant(inp.tenant)
        self.visibility.start(spec, inp.tenant)
        # Before the first command. With CONVERSATION_REF_PATCH the conversation goes to the payload store as a
        # session's does, so a step's llm.call carries only what the step added; runs recorded without the
        # marker replay sending the whole history.
        features = self.features = Features.at_start(one_shot=True)
        # The worker's config decides the run's quotas and budget, never the input (recorded runs: as sent).
        plan = await worker_plan(inp.tenant, inp.quota)
        # The run settles with the quota desk only when it has a quota plan (a desk with no lease does nothing).
        quota_desk = self.quotas
        # A fork (its input names the source's conversation) describes its tools first, as it always did.
        if inp.fork is None and resolves_tools_lazily(spec, features.release):
            check_spec_but_tools(spec)
            run = AgentRun.one_shot(
                spec,
                [],
                features,
                progress=self.progress,
                approvals=self.approvals,
                pending_tools=spec.tools,
                key_scope=inp.key_scope,
                quota=plan,
                quota_desk=quota_desk,
            )
            return await run_steps(run, [opening(spec, []), Message.user(inp.input)])
        tools = await spec_tools(spec)
        run = AgentRun.one_shot(
            spec,
            tools,
            features,
            progress=self.progress,
            approvals=self.approvals,
            key_scope=inp.key_scope,
            quota=plan,
            quota_desk=quota_desk,
        )
        if inp.fork is None:
            return await run_steps(run, [opening(spec, tools), Message.user(inp.input)])
        # A fork (a new kind of input, so no recorded run takes this branch): the source's conversation, and
        # its effects known to the ledger and told to the model in the system prompt.
        system = opening(spec, tools)
        if run.effects is not None:
            run.effects.inherit(f"run {inp.fork.workflow_id}, which this run is a fork of", inp.fork.effects)
            note = run.effects.inherited_note(python_name(spec, tools))
            if note:
                system = system.model_copy(update={"content": f"{system.content or ''}\n\n{note}"})
        check_fork(spec, tools, inp.fork)
        return await run_steps(run, [system, *inp.fork.messages], inp.fork)
