"""Sessions from Python: create-or-continue in one call, follow, close.

``send_turn`` is update-with-start: it starts the session if no open workflow
has that id, and sends the turn to it either way, in one round trip. Other
languages do the same by name (README: "A session"; docs/sessions.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from ..contracts import AgentSpec, ToolSchema
from ..contracts.approvals import ApprovalDecision, ApprovalRecord, PendingApproval
from ..contracts.errors import SessionClosedError
from ..contracts.names import (
    APPROVALS_QUERY,
    APPROVE_UPDATE,
    CLOSE_UPDATE,
    REWIND_UPDATE,
    REJECT_UPDATE,
    SESSION_WORKFLOW,
    STATE_QUERY,
    TURN_UPDATE,
    TURNS_QUERY,
)
from ..contracts.session import (
    CloseInput,
    RewindInput,
    SessionConfig,
    SessionInput,
    SessionOutcome,
    SessionState,
    TurnInput,
    TurnResult,
    TurnSummary,
)
from .runs import validate_spec


def new_session_id(spec: AgentSpec) -> str:
    return f"session-{spec.name}-{uuid.uuid4().hex[:12]}"


async def send_turn(
    client: Client,
    spec: AgentSpec,
    text: str,
    *,
    session_id: str,
    task_queue: str = "agentsteps",
    config: SessionConfig | None = None,
    known_tools: Mapping[str, ToolSchema] | None = None,
) -> TurnResult:
    """One turn of session ``session_id``, starting the session if it is not open yet.

    ``spec`` and ``config`` only matter when this call starts the session; an
    open session keeps the spec it started with.
    """
    validate_spec(spec, known_tools)
    start = WithStartWorkflowOperation(
        SESSION_WORKFLOW,
        SessionInput(spec=spec, session=config or SessionConfig()),
        id=session_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        result_type=SessionOutcome,
    )
    return await client.execute_update_with_start_workflow(
        TURN_UPDATE, TurnInput(input=text), start_workflow_operation=start, result_type=TurnResult
    )


def session_handle(client: Client, session_id: str) -> WorkflowHandle[object, SessionOutcome]:
    return client.get_workflow_handle(session_id, result_type=SessionOutcome)


async def continue_session(client: Client, session_id: str, text: str) -> TurnResult:
    """A turn on a session that must already be open (no spec needed)."""
    return await session_handle(client, session_id).execute_update(
        TURN_UPDATE, TurnInput(input=text), result_type=TurnResult
    )


async def session_state(client: Client, session_id: str) -> SessionState:
    return await session_handle(client, session_id).query(STATE_QUERY, result_type=SessionState)


async def session_turns(client: Client, session_id: str) -> list[TurnSummary]:
    return await session_handle(client, session_id).query(TURNS_QUERY, result_type=list[TurnSummary])


async def close_session(client: Client, session_id: str, reason: str = "closed by caller") -> SessionState:
    return await session_handle(client, session_id).execute_update(
        CLOSE_UPDATE, CloseInput(reason=reason), result_type=SessionState
    )


async def rewind_session(client: Client, session_id: str, to_turn: int) -> SessionState:
    """The session goes on from its state after turn ``to_turn`` (0: a fresh start); undone turns stay in
    ``SessionState.rewinds`` and their effects are told to later turns, never repeated."""
    return await session_handle(client, session_id).execute_update(
        REWIND_UPDATE, RewindInput(to_turn=to_turn), result_type=SessionState
    )


async def decide_approval(
    client: Client, workflow_id: str, approval_id: str, *, approve: bool, note: str = "", approver: str = ""
) -> ApprovalRecord:
    """Approve or reject a waiting call of a session (or a one-shot run).

    Raises ``SessionClosedError`` when the workflow has ended; a refused decision
    (unknown or already decided id) is a ``WorkflowUpdateFailedError`` whose cause
    is the ``ApprovalError``.
    """
    try:
        return await client.get_workflow_handle(workflow_id).execute_update(
            APPROVE_UPDATE if approve else REJECT_UPDATE,
            ApprovalDecision(approval_id=approval_id, note=note, approver=approver),
            result_type=ApprovalRecord,
        )
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise SessionClosedError(f"{workflow_id} has ended; no call of it can be approved") from exc
        raise


async def pending_approvals(client: Client, workflow_id: str) -> list[PendingApproval]:
    return await client.get_workflow_handle(workflow_id).query(APPROVALS_QUERY, result_type=list[PendingApproval])


__all__ = [
    "close_session",
    "decide_approval",
    "pending_approvals",
    "continue_session",
    "new_session_id",
    "send_turn",
    "session_handle",
    "session_state",
    "session_turns",
]
