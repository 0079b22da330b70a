"""Tools and a worker for the code-mode end-to-end tests (in-process or as a subprocess).

The ticket tools count their side effects in SQLite, on the tool's side, so a
test can prove each one ran exactly once across worker crashes.

usage as a process: python code_mode_support.py ADDRESS TASK_QUEUE OPENAI_BASE_URL STATE_DIR
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from child_main import run_child, serve_until_killed, worker_options
from pydantic import BaseModel
from temporalio.client import Client
from temporalio.worker import Worker

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.notify import ApprovalNotifier
from agentsteps.activities.quotas import QuotaPlanActivities
from agentsteps.activities.sandbox import SandboxActivities, SandboxPool, SnapshotVault, load_snapshot_key
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.client.search_attributes import ensure_search_attributes
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import PayloadStore, build_payload_store
from agentsteps.workflows.agent import AgentWorkflow
from agentsteps.workflows.session import SessionWorkflow

TICKET_BODY = "Steps to reproduce: open the app, click the thing, watch it fail. " * 16


class ListQuery(BaseModel):
    status: str
    count: int = 20


class Ticket(BaseModel):
    id: int
    title: str
    due: str
    stalled: bool
    body: str


class TicketList(BaseModel):
    tickets: list[Ticket]


class NudgeArgs(BaseModel):
    id: int
    delay_seconds: float = 0.0


class Nudge(BaseModel):
    id: int
    first_time: bool


class SleepArgs(BaseModel):
    seconds: float


def make_tickets(count: int) -> list[Ticket]:
    return [
        Ticket(
            id=i,
            title=f"ticket {i}",
            due=f"2026-{1 + (i * 7) % 12:02d}-{1 + (i * 13) % 28:02d}",
            stalled=i % 3 == 0,
            body=TICKET_BODY,
        )
        for i in range(1, count + 1)
    ]


class NudgeLedger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS nudges (key TEXT PRIMARY KEY, ticket INTEGER, attempts INTEGER)")

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def nudge(self, key: str, ticket: int) -> bool:
        with self._db() as db:
            row = db.execute("SELECT attempts FROM nudges WHERE key = ?", (key,)).fetchone()
            if row:
                db.execute("UPDATE nudges SET attempts = attempts + 1 WHERE key = ?", (key,))
                return False
            db.execute("INSERT INTO nudges VALUES (?, ?, 1)", (key, ticket))
            return True

    def nudged(self) -> list[int]:
        with self._db() as db:
            return [r[0] for r in db.execute("SELECT ticket FROM nudges ORDER BY ticket")]

    def attempts(self) -> int:
        with self._db() as db:
            return db.execute("SELECT COALESCE(SUM(attempts), 0) FROM nudges").fetchone()[0]


def build_registry(state_dir: Path) -> ToolRegistry:
    registry = ToolRegistry()
    ledger = NudgeLedger(state_dir / "nudges.db")

    @registry.tool(name="tickets.list")
    def list_tickets(query: ListQuery) -> TicketList:
        """List tickets with a status."""
        return TicketList(tickets=make_tickets(query.count))

    @registry.tool(name="tickets.nudge", side_effects=True)
    async def nudge(args: NudgeArgs, ctx: ToolContext) -> Nudge:
        """Post a nudge on a ticket. Runs once per idempotency key."""
        first = await asyncio.to_thread(ledger.nudge, ctx.idempotency_key, args.id)
        if args.delay_seconds:
            await asyncio.sleep(args.delay_seconds)
        return Nudge(id=args.id, first_time=first)

    @registry.tool(name="tickets.close", side_effects=True, requires_approval=True)
    async def close(args: NudgeArgs, ctx: ToolContext) -> Nudge:
        """Close a ticket. A person approves every call first."""
        first = await asyncio.to_thread(ledger.nudge, ctx.idempotency_key, args.id)
        return Nudge(id=args.id, first_time=first)

    @registry.tool(name="wait")
    async def wait(args: SleepArgs) -> Nudge:
        """Sleep, then answer."""
        await asyncio.sleep(args.seconds)
        return Nudge(id=0, first_time=True)

    return registry


def worker_settings(state_dir: Path, task_queue: str, base_url: str) -> WorkerSettings:
    return WorkerSettings(
        state_dir=state_dir,
        task_queue=task_queue,
        snapshot_key="test-snapshot-key-0123456789abcdef",
        providers=ProviderSettings(openai_base_url=base_url, request_timeout_seconds=10),
    )


@asynccontextmanager
async def code_worker(client: Client, settings: WorkerSettings, pool: SandboxPool | None = None):
    """A worker with the LLM, tool and sandbox activities, on ``settings.task_queue``."""
    # As running_worker does: runs upsert the AgentSteps* search attributes (a fresh time-skipping server lacks them).
    await ensure_search_attributes(client, client.namespace)
    store: PayloadStore = build_payload_store(settings)
    pool = pool or SandboxPool(max_processes=2)
    sandbox = SandboxActivities(pool, SnapshotVault(store, load_snapshot_key(settings)))
    # As build_worker does: a program live here resumes inside its call's tools.call activity.
    tools = ToolActivities(build_registry(settings.state_dir), programs=sandbox.resume_carried)
    async with httpx2.AsyncClient(timeout=10) as http:
        plans = QuotaPlanActivities(settings)
        llm = LLMActivities(settings.providers, http, settings.prices, ConversationStore(store), plans=plans.plan_of)
        async with Worker(
            client,
            task_queue=settings.task_queue,
            workflows=[AgentWorkflow, SessionWorkflow],
            activities=[
                llm.call,
                llm.call_plan_first,  # a run's first model call asks the worker's quota plan
                tools.describe,
                tools.call,
                sandbox.check,
                sandbox.start,
                sandbox.resume,
                sandbox.fork,
                plans.plan,  # runs recorded before the 2026-12-06 release ask it at their start
                *ApprovalNotifier(settings.approval_webhooks).activities(),  # asked at a run's first waiting call
            ],
            max_concurrent_activities=20,
            **{"max_cached_workflows": 1000, **worker_options()},
        ) as worker:
            yield worker, sandbox
    await pool.close()


async def connect_with_store(address: str, settings: WorkerSettings) -> Client:
    return await Client.connect(address, data_converter=build_payload_store(settings).data_converter())


async def _main(address: str, task_queue: str, base_url: str, state_dir: str) -> None:
    settings = worker_settings(Path(state_dir), task_queue, base_url)
    client = await connect_with_store(address, settings)
    async with code_worker(client, settings):
        await serve_until_killed()


if __name__ == "__main__":
    run_child(_main, *sys.argv[1:5])
