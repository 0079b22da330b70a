"""A batch of decisions landing in one workflow task costs the desk a linear number of look-ups.

Before: each decision beyond the 200 kept scanned every decision for one it
could forget, and while a batch is still unread (none of its calls has woken
yet) there is none, so a batch of n decisions made about n²/2 look-ups in the
one activation that delivers them (480,000 for 1,000), time that counts
against the SDK's 2 s deadlock limit for that activation. The desk below is
the real one, in a real workflow on a real server; its ``pending`` map counts
membership tests, the only thing the scan did per decision.
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio import workflow
from temporalio.worker import Worker

from agentsteps.activities.notify import ApprovalNotifier
from agentsteps.contracts import ToolSchema
from agentsteps.contracts.approvals import PendingApproval
from agentsteps.workflows.approvals import ApprovalDesk

CALLS = 1000


class _CountingPending(dict[str, PendingApproval]):
    lookups = 0

    def __contains__(self, key: object) -> bool:
        self.lookups += 1
        return super().__contains__(key)


@workflow.defn(name="TestDecisionBatch", sandboxed=False)
class DecisionBatch:
    @workflow.run
    async def run(self, calls: int) -> dict[str, object]:
        desk = ApprovalDesk()
        desk.pending = pending = _CountingPending()
        tool = ToolSchema(name="refund", side_effects=True, requires_approval=True)
        gates = [asyncio.ensure_future(desk.gate(f"call-{n}", tool, "{}", 3600)) for n in range(calls)]
        await workflow.wait_condition(lambda: len(desk.pending) == calls)
        pending.lookups = 0
        # As ``calls`` approve Updates accepted in one workflow task: every decision lands before any call wakes.
        for n in range(calls):
            desk.decide({"approval_id": f"call-{n}", "approver": "ana"}, "approved")
        decided_lookups = pending.lookups
        records = await asyncio.gather(*gates)
        return {
            "ids": [r.approval_id for r in records],
            "outcomes": sorted({r.outcome for r in records}),
            "lookups": decided_lookups,
            "still_waiting": len(desk.pending),
        }


async def test_a_batch_of_decisions_in_one_task_reaches_every_call_in_linear_lookups(client):
    queue = f"decision-batch-{uuid.uuid4().hex[:8]}"
    # The worker's notifier answers the desk's one question (which calls have webhooks): none here.
    async with Worker(
        client, task_queue=queue, workflows=[DecisionBatch], activities=ApprovalNotifier([]).activities()
    ):
        result = await client.execute_workflow(
            DecisionBatch.run,
            CALLS,
            id=f"decision-batch-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
    assert result["ids"] == [f"call-{n}" for n in range(CALLS)]  # each call read its own decision
    assert result["outcomes"] == ["approved"] and result["still_waiting"] == 0
    # Two per decision (the validator's "is it waiting", and marking it unread); the scan made ~480,000.
    assert result["lookups"] <= 3 * CALLS, result["lookups"]
