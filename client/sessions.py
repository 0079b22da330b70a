"""Sessions from Python: create-or-continue in one call, follow, close.

``send_turn`` is update-with-start: it starts the session if no workflow ever
had that id, and sends the turn to it either way, in one round trip. Other
languages do the same by name (README: "A session"; docs/sessions.md).

A closed session's id is never silently reused: the start carries
``REJECT_DUPLICATE``, so a turn for a session that was closed, timed out idle
or failed raises ``SessionClosedError`` instead of answering as turn 1 of an
empty session. A caller who wants a new session under that id says so
(``reopen=True``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TypeVar

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from ..contracts import AgentSpec, ToolSchema
from ..contracts.approvals import ApprovalDecision, ApprovalRecord, PendingApproval
from ..contracts.errors import SessionClosedError
from ..contracts.names import (
    APPROVALS_QUERY,
    APPROVE_UPDATE,
    CLOSE_UPDATE,
    REJECT_UPDATE,
    REWIND_UPDATE,
    SESSION_WORKFLOW,
    STATE_QUERY,
    TURN_UPDATE,
    TURNS_QUERY,
)
from ..contracts.quotas.wire import QuotaPlan
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
from .runs import ignored_plan, validate_key_scope, validate_spec, validate_tenant

T = TypeVar("T")


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
    key_scope: str | None = None,
    reopen: bool = False,
    tenant: str | None = None,
    quota: QuotaPlan | None = None,
) -> TurnResult:
    """One turn of session ``session_id``, starting the session if it never existed.

    ``spec``, ``config`` and ``key_scope`` (``SessionInput.key_scope``: dedupe across sessions) only
    matter when this call starts the session; an open session keeps the ones it started with. A session
    under this id that has ended (closed, idle timeout, failed) raises ``SessionClosedError`` unless
    ``reopen`` asks for a new, empty session under the same id. ``tenant`` and ``quota`` (deprecated, never
    sent) as for ``start_agent_run``.
    """
    validate_spec(spec, known_tools)
    validate_key_scope(key_scope)
    validate_tenant(tenant)
    ignored_plan(quota)
    start: WithStartWorkflowOperation[object, SessionOutcome] = WithStartWorkflowOperation(
        SESSION_WORKFLOW,
        SessionInput(spec=spec, session=config or SessionConfig(), key_scope=key_scope, tenant=tenant),
        id=session_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if reopen else WorkflowIDReusePolicy.REJECT_DUPLICATE,
        result_type=SessionOutcome,
    )
    try:
        result: TurnResult = await client.execute_update_with_start_workflow(
            TURN_UPDATE, TurnInput(input=text), start_workflow_operation=start, result_type=TurnResult
        )
        return result
    except WorkflowAlreadyStartedError as exc:
        raise SessionClosedError(await closed_message(client, session_id)) from exc
    except RPCError as exc:  # some servers (the time-skipping one) answer with the bare status
        if exc.status is RPCStatusCode.ALREADY_EXISTS:
            raise SessionClosedError(await closed_message(client, session_id)) from exc
        raise


def session_handle(client: Client, session_id: str) -> WorkflowHandle[object, SessionOutcome]:
    return client.get_workflow_handle(session_id, result_type=SessionOutcome)


async def _update_open(client: Client, session_id: str, update: str, arg: object, result_type: type[T]) -> T:
    """``update`` on a session that must be open; ``SessionClosedError`` (how it ended) if it is not."""
    try:
        result: T = await session_handle(client, session_id).execute_update(update, arg, result_type=result_type)
        return result
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise SessionClosedError(await closed_message(client, session_id)) from exc
        raise


async def continue_session(client: Client, session_id: str, text: str) -> TurnResult:
    """A turn on a session that must already be open (no spec needed); ``SessionClosedError`` if it has ended."""
    return await _update_open(client, session_id, TURN_UPDATE, TurnInput(input=text), TurnResult)


async def closed_message(client: Client, session_id: str) -> str:
    """One line naming how the session ended and how to start a new one under its id."""
    handle = session_handle(client, session_id)
    try:
        status = (await handle.describe()).status
        how = status.name.lower().replace("_", " ") if status is not None else "ended"
        if status is WorkflowExecutionStatus.COMPLETED:
            how = (await handle.result()).reason
    except (RPCError, WorkflowFailureError):
        how = "ended"
    return (
        f"session {session_id} has ended ({how}); its id is not reused silently: "
        "pass reopen=True to start a new, empty session under it (or start one with another id: agentsteps chat "
        "--spec FILE)"
    )


async def session_state(client: Client, session_id: str) -> SessionState:
    state: SessionState = await session_handle(client, session_id).query(STATE_QUERY, result_type=SessionState)
    return state


async def session_turns(client: Client, session_id: str) -> list[TurnSummary]:
    turns: list[TurnSummary] = await session_handle(client, session_id).query(
        TURNS_QUERY, result_type=list[TurnSummary]
    )
    return turns


async def close_session(client: Client, session_id: str, reason: str = "closed by caller") -> SessionState:
    return await _update_open(client, session_id, CLOSE_UPDATE, CloseInput(reason=reason), SessionState)


async def rewind_session(client: Client, session_id: str, to_turn: int) -> SessionState:
    """The session goes on from its state after turn ``to_turn`` (0: a fresh start); undone turns stay in
    ``SessionState.rewinds`` and their effects are told to later turns, never repeated. ``SessionClosedError``
    (how it ended) if the session has ended."""
    return await _update_open(client, session_id, REWIND_UPDATE, RewindInput(to_turn=to_turn), SessionState)


async def decide_approval(
    client: Client, workflow_id: str, approval_id: str, *, approve: bool, note: str = "", approver: str = ""
) -> ApprovalRecord:
    """Approve or reject a waiting call of a session (or a one-shot run).

    Raises ``SessionClosedError`` when the workflow has ended; a refused decision
    (unknown or already decided id) is a ``WorkflowUpdateFailedError`` whose cause
    is the ``ApprovalError``.
    """
    try:
        record: ApprovalRecord = await client.get_workflow_handle(workflow_id).execute_update(
            APPROVE_UPDATE if approve else REJECT_UPDATE,
            ApprovalDecision(approval_id=approval_id, note=note, approver=approver),
            result_type=ApprovalRecord,
        )
        return record
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise SessionClosedError(f"{workflow_id} has ended; no call of it can be approved") from exc
        raise


async def pending_approvals(client: Client, workflow_id: str) -> list[PendingApproval]:
    pending: list[PendingApproval] = await client.get_workflow_handle(workflow_id).query(
        APPROVALS_QUERY, result_type=list[PendingApproval]
    )
    return pending


__all__ = [
    "close_session",
    "closed_message",
    "decide_approval",
    "pending_approvals",
    "continue_session",
    "new_session_id",
    "rewind_session",
    "send_turn",
    "session_handle",
    "session_state",
    "session_turns",
]
