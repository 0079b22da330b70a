"""A test build of AgentWorkflow with an ungated command change: what ``replay --check`` must catch.

Registered under the real workflow name, it starts a timer before the run's
first activity and adds no ``workflow.patched`` gate, as a careless change would.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentsteps.contracts import AgentInput, AgentResult
    from agentsteps.contracts.names import AGENT_WORKFLOW
    from agentsteps.workflows.agent import AgentWorkflow


@workflow.defn(name=AGENT_WORKFLOW)
class AgentWorkflowWithUngatedTimer(AgentWorkflow):
    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        await workflow.sleep(timedelta(milliseconds=1))
        return await super().run(inp)
