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
from ..contracts.approvals import ApprovalRecord, PendingApproval
from ..contracts.names import APPROVALS_QUERY, DECISIONS_QUERY, SESSION_WORKFLOW

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
    known = await _known(client, workflow_id, description.status, approval_id, kind)
    if isinstance(known, ApprovalRecord):
        return decided_text(known)
    how = _STOPPED.get(description.status, "ended") if description.status else "ended"
    when = at(description.close_time)
    if known == "waiting":
        return f"the {kind} {how} {when} while this call waited, before anyone decided; it did not run"
    if known == "unknown":
        return f"the {kind} {how} {when}, and no call of it ever waited under that id; nothing changed"
    return f"the {kind} {how} {when}; nothing can be decided on it any more"


async def _known(
    client: Client, workflow_id: str, status: WorkflowExecutionStatus | None, approval_id: str, kind: str
) -> ApprovalRecord | str:
    """The call's record; else ``waiting`` (it waited when the run ended), ``unknown`` (the run never had it)
    or ``""`` (the run could not be asked: no worker replays it, or it predates the ``decisions`` query)."""
    handle = client.get_workflow_handle(workflow_id, result_type=AgentResult)
    try:
        if kind == "run" and status is WorkflowExecutionStatus.COMPLETED:
            # Every call of a completed run was decided, timed out or withdrawn: its result has them all.
            result: AgentResult = await handle.result(rpc_timeout=ASK_TIMEOUT)
            records: list[ApprovalRecord] = result.approvals
            done = next((r for r in records if r.approval_id == approval_id), None)
            return done if done is not None else "unknown"
        records = await handle.query(DECISIONS_QUERY, result_type=list[ApprovalRecord], rpc_timeout=ASK_TIMEOUT)
        found: ApprovalRecord | None = next((r for r in records if r.approval_id == approval_id), None)
        if found is not None:
            return found
        waiting = await handle.query(APPROVALS_QUERY, result_type=list[PendingApproval], rpc_timeout=ASK_TIMEOUT)
    except Exception:  # no worker to replay it, or a run from before the query: the describe still tells
        return ""
    return "waiting" if any(p.approval_id == approval_id for p in waiting) else "unknown"


def ended_sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


__all__ = ["at", "decided_text", "ended", "ended_sentence"]
