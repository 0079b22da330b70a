"""What a person changes from the console: a decision, a turn, a close. Each answers in words.

A refusal is never an error page: a decision on a call that was already
decided, that timed out, or whose run ended is told as such, and so is a turn
sent to a busy or closed session.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from ..client.sessions import decide_approval
from ..contracts.approvals import ApprovalRecord
from ..contracts.errors import AgentStepsError, ApprovalError, RunNotFoundError, SessionClosedError
from ..contracts.names import CLOSE_UPDATE, DECISIONS_QUERY, TURN_UPDATE
from ..contracts.session import CloseInput, SessionState, TurnInput
from . import refusals

SETTLE_SECONDS = 1.0
MAX_NAME = 200
MAX_NOTE = 2000


@dataclass(frozen=True)
class Told:
    text: str
    tone: str = "ok"
    """``ok`` or ``bad``: how the page shows it."""


async def decide(client: Client, workflow_id: str, approval_id: str, approve: bool, note: str, approver: str) -> Told:
    verb = "approved" if approve else "rejected"
    try:
        record = await decide_approval(
            client, workflow_id, approval_id, approve=approve, note=note[:MAX_NOTE], approver=approver[:MAX_NAME]
        )
    except (SessionClosedError, RunNotFoundError):  # what became of the call: asked of the ended run
        return Told(f"Not recorded: {await refusals.ended(client, workflow_id, approval_id)}.", "bad")
    except ApprovalError as exc:  # already decided, withdrawn, unknown: the running run's decisions say which
        return Told(f"Not recorded: {await _refused(client, workflow_id, approval_id, str(exc))}.", "bad")
    except AgentStepsError as exc:
        return Told(f"Not recorded: {exc}.", "bad")
    except WorkflowUpdateFailedError as exc:
        return Told(f"Not recorded: {await _refused(client, workflow_id, approval_id, _cause(exc))}.", "bad")
    except RPCError as exc:
        return Told(f"Not recorded: {_rpc(exc, workflow_id)}.", "bad")
    who = f" by {record.approver}" if record.approver else ""
    return Told(f"{record.tool} was {verb}{who} {refusals.at(record.decided_at)}.")


async def what_became_of(client: Client, workflow_id: str, approval_id: str, running: bool) -> str:
    """A call that no longer waits (or never did), in words: for a link opened after its call was decided."""
    if not running:
        return refusals.ended_sentence(await refusals.ended(client, workflow_id, approval_id))
    try:
        records = await client.get_workflow_handle(workflow_id).query(
            DECISIONS_QUERY, result_type=list[ApprovalRecord], rpc_timeout=refusals.ASK_TIMEOUT
        )
    except RPCError:
        records = []
    record = next((r for r in records if r.approval_id == approval_id), None)
    if record is not None:
        return refusals.ended_sentence(refusals.decided_text(record))
    return f"No call of {workflow_id} waits under that id; nothing was decided."


async def _refused(client: Client, workflow_id: str, approval_id: str, cause: str) -> str:
    """A running run refused the decision: what became of the call, if anything did."""
    try:
        records = await client.get_workflow_handle(workflow_id).query(
            DECISIONS_QUERY, result_type=list[ApprovalRecord], rpc_timeout=refusals.ASK_TIMEOUT
        )
    except Exception:  # a worker from before the query: its own words
        return cause
    record = next((r for r in records if r.approval_id == approval_id), None)
    if record is not None:
        return refusals.decided_text(record)
    if cause.startswith("no call is waiting"):
        return f"no call of {workflow_id} waits under that id, and none was decided under it; nothing changed"
    return cause


async def send_turn(client: Client, session_id: str, text: str) -> Told:
    """Accepted (or refused) at once; the page then follows the turn on the session's stream."""
    try:
        update = await client.get_workflow_handle(session_id).start_update(
            TURN_UPDATE, TurnInput(input=text), wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        # Two turns accepted in one workflow task both pass the validator; the handler refuses the
        # second at once. A moment's wait tells the person that, instead of "sent".
        done, _ = await asyncio.wait([asyncio.ensure_future(update.result())], timeout=SETTLE_SECONDS)
        for finished in done:
            finished.result()
    except WorkflowUpdateFailedError as exc:
        return Told(f"The turn was not sent: {_cause(exc)}.", "bad")
    except RPCError as exc:
        return Told(f"The turn was not sent: {_rpc(exc, session_id)}.", "bad")
    return Told("Turn sent; its answer streams below.")


async def close(client: Client, session_id: str, reason: str) -> Told:
    try:
        state = await client.get_workflow_handle(session_id).execute_update(
            CLOSE_UPDATE, CloseInput(reason=reason[:500] or "closed from the console"), result_type=SessionState
        )
    except WorkflowUpdateFailedError as exc:
        return Told(f"Not closed: {_cause(exc)}.", "bad")
    except RPCError as exc:
        return Told(f"Not closed: {_rpc(exc, session_id)}.", "bad")
    return Told(f"Session closed after {state.turns} turns.")


def _cause(exc: WorkflowUpdateFailedError) -> str:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or exc)


def _rpc(exc: RPCError, workflow_id: str) -> str:
    if exc.status is RPCStatusCode.NOT_FOUND:
        return f"{workflow_id} has ended or does not exist"
    return f"the Temporal server said: {exc.message}"


__all__ = ["Told", "close", "decide", "send_turn", "what_became_of"]
