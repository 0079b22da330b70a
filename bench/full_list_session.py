"""The baseline for ``session_history.py``: a session that sends the full message list in every ``llm.call``.

It runs the very same step engine as ``SessionWorkflow`` (``steps.run_steps``
on an ``AgentRun``), only without the stored conversation: this is what every
call looked like before sessions stored their history as a hash chain.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentsteps.contracts import AgentSpec, Message, ToolSchema
    from agentsteps.contracts.session import TurnInput, TurnResult
    from agentsteps.workflows.agent_run import AgentRun
    from agentsteps.workflows.approvals import ApprovalDesk
    from agentsteps.workflows.releases.gates import Features
    from agentsteps.workflows.run_state import RunConfig, RunTools
    from agentsteps.workflows.steps import opening, run_steps, spec_tools

BASELINE_WORKFLOW = "BenchFullListSession"


@workflow.defn(name=BASELINE_WORKFLOW)
class FullListSession:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.tools: list[ToolSchema] | None = None
        self.turns = 0
        self.done = False

    @workflow.run
    async def run(self, spec: AgentSpec) -> int:
        self.tools = await spec_tools(spec)
        self.spec = spec
        await workflow.wait_condition(lambda: self.done and workflow.all_handlers_finished())
        return self.turns

    @workflow.update(name="turn")
    async def turn(self, inp: TurnInput) -> TurnResult:
        await workflow.wait_condition(lambda: self.tools is not None)
        assert self.tools is not None
        self.turns += 1
        # A turn's run, only without the stored conversation (no chain).
        features = Features.at_start(one_shot=False)
        config = RunConfig(spec=self.spec, approvals=ApprovalDesk(), scope=f"t{self.turns}.")
        run = AgentRun(config, RunTools(self.tools), features)
        before = self.messages or [opening(self.spec, self.tools)]
        result = await run_steps(run, [*before, Message.user(inp.input)])
        self.messages = run.history
        return TurnResult(**result.model_dump(), turn=self.turns)

    @workflow.signal(name="finish")
    def finish(self) -> None:
        self.done = True
