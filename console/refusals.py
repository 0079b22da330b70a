"""Why a decision was not recorded, in plain words a person can trust.

A decision can miss its call in five ways, and each is told as what happened,
never as a guess: someone decided first (who, and when), nobody decided in time
(it timed out, and when), the run or session was stopped (terminated,
cancelled, failed, timed out) or ended, or there never was such a run. What
happened is asked of the run itself: a completed run's result holds its
decisions; any other ended run answers the ``decisions`` query (a worker
replays it); a describe tells how and when it ended.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from ..contracts import AgentResult
from ..contracts.approvals import ApprovalRecord
from ..contracts.names import DECISIONS_QUERY, SESSION_WORKFLOW

ASK_TIMEOUT = timedelta(seconds=4)

_STOPPED = {
    WorkflowExecutionStatus.TERMINATED: "was stopped (terminated)",
    WorkflowExecutionStatus.CANCELED: "was stopped (cancelled)",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "ran out of time (its workflow timeout)",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "moved on to a new run",
    WorkflowExecutionStatus.COMPLETED: "finished",
}


def at(moment: datetime | None) -> str:
    if moment is None:
        return "at an unknown time"
    return "at " + moment.astimezone(timezone.utc).strftime("%H:%M:%S UTC on %Y-%m-%d")


def decided_text(record: ApprovalRecord) -> str:
    """What happened to a call, once something did."""
    tool = record.tool or "the call"
    if record.outcome in ("approved", "rejected"):
        who = f" by {record.approver}" if record.approver else " (no name was given)"
        return f"{tool} was already {record.outcome}{who} {at(record.decided_at)}"
    if record.outcome == "timed_out":
        return f"{tool} timed out {at(record.decided_at)}: nobody decided in time, so it did not run"
    return f"{tool} was withdrawn {at(record.decided_at)} ({record.note}); it did not run"


async def ended(client: Client, workflow_id: str, approval_id: str) -> str:
    """The sentence after "Not recorded: " for a decision sent to a run that is no longer running."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe(rpc_timeout=ASK_TIMEOUT)
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return f"there is no run or session {workflow_id} (it never existed, or its history was deleted)"
        return f"the Temporal server did not say what became of {workflow_id} ({exc.message})"
    kind = "session" if description.workflow_type == SESSION_WORKFLOW else "run"
    record = await _record(client, workflow_id, description.status, approval_id, kind)
    if record is not None:
        return decided_text(record)
    how = _STOPPED.get(description.status, "ended") if description.status else "ended"
    return (
        f"the {kind} {how} {at(description.close_time)} before anyone decided this call; "
        "it did not run, and nothing can be decided on it any more"
    )


async def _record(
    client: Client, workflow_id: str, status: WorkflowExecutionStatus | None, approval_id: str, kind: str
) -> ApprovalRecord | None:
    handle = client.get_workflow_handle(workflow_id, result_type=AgentResult)
    records: list[ApprovalRecord] = []
    try:
        if kind == "run" and status is WorkflowExecutionStatus.COMPLETED:
            records = (await handle.result(rpc_timeout=ASK_TIMEOUT)).approvals
        else:
            records = await handle.query(DECISIONS_QUERY, result_type=list[ApprovalRecord], rpc_timeout=ASK_TIMEOUT)
    except Exception:  # no worker to replay it, or a run from before the query: the describe still tells
        return None
    return next((r for r in records if r.approval_id == approval_id), None)


__all__ = ["at", "decided_text", "ended"]
