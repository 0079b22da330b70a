"""Scale-out tests' worker process and tool: the real ``running_worker`` with settings from
``$SCALE_SETTINGS`` (JSON), and one side-effecting tool whose result is over 256 KiB.

usage: python scale_support.py   (settings and ledger path in the environment)

The tool keeps a ledger in SQLite shared by every worker process: one row per
idempotency key (the side effect, done once) and one row per attempt, with the
worker's pid and the workflow id, so a test can kill the worker that holds a
given run's call and later count what happened.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from child_main import run_child, serve_until_killed, worker_options
from pydantic import BaseModel, Field
from temporalio import activity

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.contracts.config.settings import WorkerSettings

ROW = "x" * 1000
ROWS = 300  # 300 KB: every result goes through the payload store


class FetchArgs(BaseModel):
    n: int = Field(ge=0, le=100)
    delay_seconds: float = Field(default=0, ge=0, le=30)


class FetchResult(BaseModel):
    n: int
    rows: list[str]


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with closing(self._db()) as db, db:
            db.execute("CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, workflow TEXT, n INTEGER)")
            db.execute(
                "CREATE TABLE IF NOT EXISTS attempts (key TEXT, workflow TEXT, pid INTEGER, started REAL,"
                " finished REAL)"
            )

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def begin(self, key: str, workflow: str, n: int) -> int:
        with closing(self._db()) as db, db:
            db.execute("INSERT OR IGNORE INTO effects VALUES (?, ?, ?)", (key, workflow, n))
            return db.execute(
                "INSERT INTO attempts VALUES (?, ?, ?, ?, NULL)", (key, workflow, os.getpid(), time.time())
            ).lastrowid

    def finish(self, attempt: int) -> None:
        with closing(self._db()) as db, db:
            db.execute("UPDATE attempts SET finished = ? WHERE rowid = ?", (time.time(), attempt))

    def effects(self, workflow: str) -> list[int]:
        with closing(self._db()) as db:
            return [r[0] for r in db.execute("SELECT n FROM effects WHERE workflow = ? ORDER BY n", (workflow,))]

    def in_flight(self) -> dict[str, set[int]]:
        """Workflow id -> pids running one of its calls right now."""
        with closing(self._db()) as db:
            rows = db.execute("SELECT workflow, pid FROM attempts WHERE finished IS NULL").fetchall()
        found: dict[str, set[int]] = {}
        for workflow, pid in rows:
            found.setdefault(workflow, set()).add(pid)
        return found

    def pids(self, workflow: str) -> set[int]:
        with closing(self._db()) as db:
            return {r[0] for r in db.execute("SELECT pid FROM attempts WHERE workflow = ?", (workflow,))}


def build_registry(settings: WorkerSettings) -> ToolRegistry:
    registry = ToolRegistry()
    ledger = Ledger(Path(os.environ["SCALE_LEDGER"]))

    @registry.tool(side_effects=True)
    async def bulk_fetch(args: FetchArgs, ctx: ToolContext) -> FetchResult:
        """Export a batch of rows (records the export once per idempotency key)."""
        attempt = await asyncio.to_thread(ledger.begin, ctx.idempotency_key, activity.info().workflow_id, args.n)
        await asyncio.sleep(args.delay_seconds)
        await asyncio.to_thread(ledger.finish, attempt)
        return FetchResult(n=args.n, rows=[ROW] * ROWS)

    return registry


async def _main() -> None:
    from agentsteps.worker import connect, running_worker

    settings = WorkerSettings.model_validate_json(os.environ["SCALE_SETTINGS"])
    if os.environ.get("SCALE_SNAPSHOT_EVERY"):  # store a paused program's snapshot every N calls, not past 200
        from agentsteps.activities.sandbox import activities as sandbox_activities

        sandbox_activities.REPLAY_CALLS_BOUND = int(os.environ["SCALE_SNAPSHOT_EVERY"])
    if os.environ.get("SCALE_KEY_WAIT"):
        # A run asks again for a snapshot signed with a key id its worker lacks every N seconds (30 s, then
        # longer), after the segment's attempts 0.1 s apart, doubling (1 s): the same attempts and waits, shorter.
        from agentsteps.workflows import program_driver

        program_driver.KEY_WAITS = (float(os.environ["SCALE_KEY_WAIT"]),) * 100
        program_driver.SEGMENT_RETRY_SECONDS = 0.1
    client = await connect(settings)
    async with running_worker(client, settings, **worker_options()):
        await serve_until_killed()


if __name__ == "__main__":
    if os.environ.get("SCALE_LOG"):  # debugging aid: the worker's log, since tests discard stderr
        import logging

        logging.basicConfig(filename=os.environ["SCALE_LOG"], level=logging.INFO)
    run_child(_main)
