"""What the console reads from Temporal, as a client: visibility rows, queries, results.

Lists come from visibility (``list_workflows`` filtered on the ``AgentSteps*``
search attributes), never from histories. A completed run does not upsert its
totals (``workflows/visibility.py``): a listed one that has none is filled in
from its result (the close event only, ``completed_totals``). A page about one run asks that run
(``state``, ``steps``, ``approvals`` queries while it runs; its result, the
close event only, once it ended). Every name comes from ``contracts/names.py``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from ..contracts import AgentResult, AgentState, Step
from ..contracts.approvals import PendingApproval
from ..contracts.names import (
    AGENT_WORKFLOW,
    APPROVALS_QUERY,
    SA_AWAITING_APPROVAL,
    SA_COST,
    SA_LAST_ACTIVITY,
    SA_MODEL,
    SA_SPEC,
    SA_STEPS,
    SA_TOKENS,
    SA_VIOLATIONS,
    SESSION_WORKFLOW,
    STATE_QUERY,
    STEPS_QUERY,
    TURNS_QUERY,
)
from ..contracts.session import SessionOutcome, SessionState, TurnSummary

PAGE_SIZE = 50
RESULT_READS = 8
"""Results of completed runs read at once while filling in a page's totals."""
QUERY_TIMEOUT = timedelta(seconds=5)
STATUSES = {
    "running": "Running",
    "completed": "Completed",
    "failed": "Failed",
    "canceled": "Canceled",
    "terminated": "Terminated",
    "timed_out": "TimedOut",
}
KINDS = {"run": AGENT_WORKFLOW, "session": SESSION_WORKFLOW}
SINCE = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7), "30d": timedelta(days=30)}
_SPEC_NAME = re.compile(r"^[A-Za-z0-9_.:/ -]{1,200}$")


class BadFilter(ValueError):
    """A list filter the console will not put into a visibility query."""


@dataclass(frozen=True)
class Filters:
    status: str = ""
    kind: str = ""
    spec: str = ""
    since: str = ""
    waiting: str = ""
    """``1``: only runs and sessions with a call waiting for approval."""

    @classmethod
    def parse(cls, params: dict[str, str]) -> Filters:
        status, kind = params.get("status", ""), params.get("kind", "")
        spec, since = params.get("spec", "").strip(), params.get("since", "")
        if status and status not in STATUSES:
            raise BadFilter(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        if kind and kind not in KINDS:
            raise BadFilter(f"unknown type {kind!r}; one of {', '.join(KINDS)}")
        if since and since not in SINCE:
            raise BadFilter(f"unknown time window {since!r}; one of {', '.join(SINCE)}")
        if spec and not _SPEC_NAME.match(spec):
            raise BadFilter("a spec name has letters, digits, spaces and . _ : / - only")
        waiting = params.get("waiting", "")
        if waiting not in ("", "1"):
            raise BadFilter("waiting is 1 or absent")
        return cls(status, kind, spec, since, waiting)

    def query(self, now: datetime) -> str:
        """The visibility query: only values checked by ``parse``, quoted."""
        kinds = [KINDS[self.kind]] if self.kind else list(KINDS.values())
        parts = ["WorkflowType IN (" + ", ".join(f"'{k}'" for k in kinds) + ")"]
        if self.status:
            parts.append(f"ExecutionStatus = '{STATUSES[self.status]}'")
        if self.spec:
            parts.append(f"{SA_SPEC} = '{self.spec}'")
        if self.waiting:
            # A terminated run keeps the attribute it last upserted: only a running one can be waiting.
            parts.append(f"{SA_AWAITING_APPROVAL} = true")
            if self.status != "running":
                parts.append("ExecutionStatus = 'Running'")
        if self.since:
            start = (now - SINCE[self.since]).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            parts.append(f"StartTime > '{start}'")
        return " AND ".join(parts)  # newest first: visibility's own order (SQL visibility refuses ORDER BY)


@dataclass
class Row:
    """One run or session as visibility shows it."""

    workflow_id: str
    run_id: str
    kind: str
    status: str
    started: datetime | None
    closed: datetime | None
    spec: str = ""
    model: str = ""
    steps: int | None = None
    tokens: int | None = None
    violations: int | None = None
    cost_usd: float | None = None
    awaiting_approval: bool = False
    last_activity: datetime | None = None

    @classmethod
    def of(cls, wf: WorkflowExecution) -> Row:
        sa: dict[str, Any] = {pair.key.name: pair.value for pair in wf.typed_search_attributes}

        def one(name: str) -> Any:
            return sa.get(name)

        return cls(
            workflow_id=wf.id,
            run_id=wf.run_id,
            kind="session" if wf.workflow_type == SESSION_WORKFLOW else "run",
            status=status_name(wf.status),
            started=wf.start_time,
            closed=wf.close_time,
            spec=one(SA_SPEC) or "",
            model=one(SA_MODEL) or "",
            steps=one(SA_STEPS),
            tokens=one(SA_TOKENS),
            violations=one(SA_VIOLATIONS),
            cost_usd=one(SA_COST),
            awaiting_approval=bool(one(SA_AWAITING_APPROVAL)),
            last_activity=one(SA_LAST_ACTIVITY) or wf.close_time or wf.start_time,
        )


def status_name(status: WorkflowExecutionStatus | None) -> str:
    return (status.name.lower() if status is not None else "unknown").replace("canceled", "cancelled")


@dataclass
class Page:
    rows: list[Row]
    next_token: str = ""


async def list_rows(client: Client, filters: Filters, token: str = "") -> Page:
    try:
        raw_token = base64.urlsafe_b64decode(token.encode()) if token else None
    except (binascii.Error, ValueError):
        raise BadFilter("that page link is damaged; start from the first page") from None
    it = client.list_workflows(
        filters.query(datetime.now(timezone.utc)), page_size=PAGE_SIZE, next_page_token=raw_token
    )
    await it.fetch_next_page()
    following = it.next_page_token
    rows = [Row.of(wf) for wf in it.current_page or []]
    await completed_totals(client, rows)
    return Page(rows, base64.urlsafe_b64encode(following).decode() if following else "")


async def completed_totals(client: Client, rows: list[Row]) -> None:
    """Steps, tokens, violations, cost and model of each completed run listed without them, from its result.

    Its search attributes still hold the zeros it started with: a run that completes keeps its totals in its
    result rather than pay an upsert for them. A result that cannot be read leaves the row as it is."""
    gate = asyncio.Semaphore(RESULT_READS)

    async def fill(row: Row) -> None:
        async with gate:
            try:
                handle = client.get_workflow_handle(row.workflow_id, run_id=row.run_id, result_type=AgentResult)
                result = await handle.result(rpc_timeout=QUERY_TIMEOUT)
            except Exception:  # gone (retention), unreadable payload: the row shows what visibility has
                return
        row.steps, row.tokens = len(result.steps), result.usage.total_tokens
        row.violations, row.cost_usd = len(result.violations), result.cost_usd
        row.model = result.model or row.model

    await asyncio.gather(*(fill(r) for r in rows if r.kind == "run" and r.status == "completed" and not r.steps))


# ------------------------------------------------------------------ the approvals inbox


@dataclass
class Waiting:
    row: Row
    pending: PendingApproval


async def inbox(client: Client) -> list[Waiting]:
    """Every call waiting for a person: the runs visibility marks as waiting, each asked what it waits for."""
    query = f"{SA_AWAITING_APPROVAL} = true AND ExecutionStatus = 'Running'"
    rows = [Row.of(wf) async for wf in client.list_workflows(query, limit=200)]

    async def ask(row: Row) -> list[Waiting]:
        try:
            pending = await client.get_workflow_handle(row.workflow_id).query(
                APPROVALS_QUERY, result_type=list[PendingApproval], rpc_timeout=QUERY_TIMEOUT
            )
        except RPCError:
            return []  # ended or unreachable since visibility listed it
        return [Waiting(row, p) for p in pending]

    found = await asyncio.gather(*(ask(r) for r in rows))
    return urgent_first([w for group in found for w in group])


async def pending(client: Client, workflow_id: str) -> list[PendingApproval]:
    found: list[PendingApproval] = await client.get_workflow_handle(workflow_id).query(
        APPROVALS_QUERY, result_type=list[PendingApproval], rpc_timeout=QUERY_TIMEOUT
    )
    return found


def urgent_first(waiting: list[Waiting]) -> list[Waiting]:
    """The call rejected soonest first; among calls due together, the newest."""
    return sorted(waiting, key=lambda w: (w.pending.expires_at, -w.pending.requested_at.timestamp()))


# ------------------------------------------------------------------ one run, one session


@dataclass
class RunView:
    row: Row
    description: WorkflowExecutionDescription
    state: AgentState | None = None
    steps: list[Step] = field(default_factory=list)
    result: AgentResult | None = None
    pending: list[PendingApproval] = field(default_factory=list)
    failure: str = ""
    unavailable: str = ""
    """Why the details could not be read (no worker answering a query), shown instead of them."""


async def describe(client: Client, workflow_id: str) -> WorkflowExecutionDescription:
    return await client.get_workflow_handle(workflow_id).describe(rpc_timeout=QUERY_TIMEOUT)


def row_of(description: WorkflowExecutionDescription) -> Row:
    return Row.of(description)


async def run_view(client: Client, description: WorkflowExecutionDescription) -> RunView:
    view = RunView(row_of(description), description)
    handle = client.get_workflow_handle(description.id, run_id=description.run_id, result_type=AgentResult)
    try:
        if description.status is WorkflowExecutionStatus.RUNNING:
            view.state, view.steps, view.pending = await asyncio.gather(
                handle.query(STATE_QUERY, result_type=AgentState, rpc_timeout=QUERY_TIMEOUT),
                handle.query(STEPS_QUERY, 0, result_type=list[Step], rpc_timeout=QUERY_TIMEOUT),
                handle.query(APPROVALS_QUERY, result_type=list[PendingApproval], rpc_timeout=QUERY_TIMEOUT),
            )
        elif description.status is WorkflowExecutionStatus.COMPLETED:
            view.result = await handle.result(rpc_timeout=QUERY_TIMEOUT)
            view.steps = view.result.steps
        else:
            try:
                await handle.result(rpc_timeout=QUERY_TIMEOUT)
            except Exception as exc:  # the run's failure: its message is what an on-call engineer needs
                view.failure = _failure_text(exc)
            # Steps of a failed run come from a query a worker answers by replaying it.
            view.steps = await handle.query(STEPS_QUERY, 0, result_type=list[Step], rpc_timeout=QUERY_TIMEOUT)
    except RPCError as exc:
        view.unavailable = f"the run's details could not be read ({exc.message}); is a worker running?"
    return view


@dataclass
class SessionView:
    row: Row
    state: SessionState | None = None
    turns: list[TurnSummary] = field(default_factory=list)
    pending: list[PendingApproval] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    """The running turn's steps, else the last turn's (while the session's workflow run holds them)."""
    outcome: SessionOutcome | None = None
    unavailable: str = ""


async def session_view(client: Client, description: WorkflowExecutionDescription) -> SessionView:
    view = SessionView(row_of(description))
    handle = client.get_workflow_handle(description.id, run_id=description.run_id, result_type=SessionOutcome)
    try:
        if description.status is WorkflowExecutionStatus.RUNNING:
            view.state, view.turns, view.pending, view.steps = await asyncio.gather(
                handle.query(STATE_QUERY, result_type=SessionState, rpc_timeout=QUERY_TIMEOUT),
                handle.query(TURNS_QUERY, result_type=list[TurnSummary], rpc_timeout=QUERY_TIMEOUT),
                handle.query(APPROVALS_QUERY, result_type=list[PendingApproval], rpc_timeout=QUERY_TIMEOUT),
                _session_steps(handle),
            )
        elif description.status is WorkflowExecutionStatus.COMPLETED:
            view.outcome = await handle.result(rpc_timeout=QUERY_TIMEOUT)
            view.state, view.turns = await asyncio.gather(
                handle.query(STATE_QUERY, result_type=SessionState, rpc_timeout=QUERY_TIMEOUT),
                handle.query(TURNS_QUERY, result_type=list[TurnSummary], rpc_timeout=QUERY_TIMEOUT),
            )
    except RPCError as exc:
        view.unavailable = f"the session's details could not be read ({exc.message}); is a worker running?"
    return view


async def _session_steps(handle: WorkflowHandle[Any, SessionOutcome]) -> list[Step]:
    """Sessions recorded before the ``steps`` query existed answer it with an error: no timeline then."""
    try:
        steps: list[Step] = await handle.query(STEPS_QUERY, 0, result_type=list[Step], rpc_timeout=QUERY_TIMEOUT)
        return steps
    except WorkflowQueryFailedError:
        return []


def _failure_text(exc: BaseException) -> str:
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 4:
        parts.append(str(current))
        current = current.__cause__
    return " ← ".join(p for p in parts if p)[:2000]


__all__ = [
    "BadFilter",
    "Filters",
    "KINDS",
    "Page",
    "Row",
    "RunView",
    "SINCE",
    "STATUSES",
    "SessionView",
    "Waiting",
    "describe",
    "inbox",
    "pending",
    "urgent_first",
    "completed_totals",
    "list_rows",
    "run_view",
    "session_view",
]
