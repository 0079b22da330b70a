"""Sessions from Python: create-or-continue in one call, follow, close.

``send_turn`` is update-with-start: it starts the session if no workflow ever
had that id, and sends the turn to it either way, in one round trip. Other
languages do the same by name (README: "A session"; docs/sessions.md).

A closed session's id is never silently reused: the start carries
``REJECT_DUPLICATE``, so a turn for a session that was closed, timed out idle
or failed raises ``SessionClosedError`` instead of answering as turn 1 of an
empty session. A caller who wants a new session under that id says so
(``reopen=True``).

Every function here raises the types of docs/failures.md, never Temporal's
wrappers (``failures.unwrap``): a refused or failed turn is its
``SessionBusyError``, ``InvalidTurnError``, ``SessionClosedError``,
``BudgetExceededError``...; an id no session ever had is
``SessionNotFoundError`` (``RunNotFoundError`` for ``decide_approval`` and
``pending_approvals``, which take a one-shot run's id too), and one whose
session has ended is ``SessionClosedError``. A failure that is not one of
ours (a termination, an RPC deadline still passing after ``UPDATE_ATTEMPTS``
sends of the update under its one id) stays Temporal's.
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
from ..contracts.errors import RunNotFoundError, SessionClosedError, SessionNotFoundError
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
from ..failures.unwrap import typed_failures
from .runs import ignored_plan, validate_key_scope, validate_spec, validate_tenant
from .update_retry import until_answered

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
    sent) as for ``start_agent_run``. A refused or failed turn raises its typed
    error (``SessionBusyError``, ``InvalidTurnError``, ``SessionClosedError``, ``BudgetExceededError``...).
    """
    validate_spec(spec, known_tools)
    validate_key_scope(key_scope)
    validate_tenant(tenant)
    ignored_plan(quota)

    async def send(update_id: str) -> TurnResult:
        # A start operation is spent by its first send: every send builds its own.
        start: WithStartWorkflowOperation[object, SessionOutcome] = WithStartWorkflowOperation(
            SESSION_WORKFLOW,
            SessionInput(spec=spec, session=config or SessionConfig(), key_scope=key_scope, tenant=tenant),
            id=session_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if reopen else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            result_type=SessionOutcome,
        )
        result: TurnResult = await client.execute_update_with_start_workflow(
            TURN_UPDATE, TurnInput(input=text), start_workflow_operation=start, id=update_id, result_type=TurnResult
        )
        return result

    try:
        with typed_failures():
            return await until_answered(send)
    except WorkflowAlreadyStartedError as exc:
        raise SessionClosedError(await closed_message(client, session_id)) from exc
    except RPCError as exc:  # some servers (the time-skipping one) answer with the bare status
        if exc.status is RPCStatusCode.ALREADY_EXISTS:
            raise SessionClosedError(await closed_message(client, session_id)) from exc
        if exc.status is RPCStatusCode.NOT_FOUND:  # the session ended while the turn was on its way
            raise await _gone(client, session_id) from exc
        raise


def session_handle(client: Client, session_id: str) -> WorkflowHandle[object, SessionOutcome]:
    return client.get_workflow_handle(session_id, result_type=SessionOutcome)


async def _update_open(client: Client, session_id: str, update: str, arg: object, result_type: type[T]) -> T:
    """``update`` on a session that must be open; ``SessionClosedError`` (how it ended) if it is not,
    ``SessionNotFoundError`` if no session ever had the id."""
    handle = session_handle(client, session_id)

    async def send(update_id: str) -> T:
        answer: T = await handle.execute_update(update, arg, id=update_id, result_type=result_type)
        return answer

    try:
        with typed_failures():
            return await until_answered(send)
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise await _gone(client, session_id) from exc
        raise


async def _gone(client: Client, session_id: str) -> SessionClosedError | SessionNotFoundError:
    """Why an id answered NOT_FOUND: nothing ever ran under it, or its session has ended."""
    try:
        await session_handle(client, session_id).describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return SessionNotFoundError(session_id)
    return SessionClosedError(await closed_message(client, session_id))


async def continue_session(client: Client, session_id: str, text: str) -> TurnResult:
    """A turn on a session that must already be open (no spec needed); ``SessionClosedError`` if it has ended."""
    return await _update_open(client, session_id, TURN_UPDATE, TurnInput(input=text), TurnResult)


REOPEN_FROM_PYTHON = (
    "start a new, empty session under it with send_turn(..., reopen=True), or one under a new id "
    "(agentsteps chat --spec FILE)"
)
NEW_FROM_A_TERMINAL = "start a new session (under a new id) with: agentsteps chat --spec FILE"


async def closed_message(client: Client, session_id: str, next_step: str = REOPEN_FROM_PYTHON) -> str:
    """One line naming how the session ended and ``next_step`` (what the reader can do: from Python by
    default; ``NEW_FROM_A_TERMINAL`` at the command line, which cannot reopen an id)."""
    handle = session_handle(client, session_id)
    try:
        status = (await handle.describe()).status
        how = status.name.lower().replace("_", " ") if status is not None else "ended"
        if status is WorkflowExecutionStatus.COMPLETED:
            how = (await handle.result()).reason
    except (RPCError, WorkflowFailureError):
        how = "ended"
    return f"session {session_id} has ended ({how}); its id is not reused silently: {next_step}"


async def _query(client: Client, session_id: str, query: str, result_type: type[T]) -> T:
    """A query of a session, open or ended; ``SessionNotFoundError`` if no session ever had the id."""
    try:
        result: T = await session_handle(client, session_id).query(query, result_type=result_type)
        return result
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise SessionNotFoundError(session_id) from exc
        raise


async def session_state(client: Client, session_id: str) -> SessionState:
    """The session's ``SessionState`` (an ended session's too, while the server keeps it)."""
    return await _query(client, session_id, STATE_QUERY, SessionState)


async def session_turns(client: Client, session_id: str) -> list[TurnSummary]:
    return await _query(client, session_id, TURNS_QUERY, list[TurnSummary])


async def close_session(client: Client, session_id: str, reason: str = "closed by caller") -> SessionState:
    """Close the session (a running turn ends first); ``SessionClosedError`` if it has already ended,
    ``SessionNotFoundError`` if no session ever had the id."""
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

    A refused decision (unknown or already decided id, withdrawn call, bad shape) raises
    ``ApprovalError``; ``SessionClosedError`` when the workflow has ended, ``RunNotFoundError``
    when nothing ever ran under ``workflow_id``.
    """
    handle = client.get_workflow_handle(workflow_id)
    decision = ApprovalDecision(approval_id=approval_id, note=note, approver=approver)

    async def send(update_id: str) -> ApprovalRecord:
        record: ApprovalRecord = await handle.execute_update(
            APPROVE_UPDATE if approve else REJECT_UPDATE, decision, id=update_id, result_type=ApprovalRecord
        )
        return record

    try:
        with typed_failures():
            return await until_answered(send)
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise await _run_gone(client, workflow_id, "no call of it can be approved") from exc
        raise


async def _run_gone(client: Client, workflow_id: str, so: str) -> SessionClosedError | RunNotFoundError:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return RunNotFoundError(workflow_id)
    return SessionClosedError(f"{workflow_id} has ended; {so}")


async def pending_approvals(client: Client, workflow_id: str) -> list[PendingApproval]:
    """The calls of a session or one-shot run waiting for a decision; ``RunNotFoundError`` for an unknown id."""
    try:
        pending: list[PendingApproval] = await client.get_workflow_handle(workflow_id).query(
            APPROVALS_QUERY, result_type=list[PendingApproval]
        )
        return pending
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise RunNotFoundError(workflow_id) from exc
        raise


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
