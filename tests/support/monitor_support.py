"""Helpers for the monitor tests: a seeded tracker, the expected set by SQL, and a worker process.

usage as a process (the token comes from the environment, never argv):
    TICKETS_TOKEN=... python monitor_support.py ADDRESS TASK_QUEUE OPENAI_BASE_URL STATE_DIR DB
"""

from __future__ import annotations

import os
import sqlite3
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from child_main import run_child, serve_until_killed, worker_options
from temporalio.client import Client

from agentsteps.contracts import LLMConfig
from agentsteps.contracts.monitor import MonitorInput, MonitorReport, MonitorSpec
from agentsteps.contracts.names import MONITOR_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.examples.tickets.seed import seed
from agentsteps.workflows.monitor.nudges import NUDGE_MARKER

MODEL = "scripted-2026-01-01"


def seed_tracker(directory: Path, issues: int = 40, seed_value: int = 5) -> tuple[Path, datetime]:
    """A fresh tracker seeded relative to the real clock, since the tracker stamps writes with it."""
    now = datetime.now(UTC).replace(microsecond=0)
    db = directory / f"tickets-{uuid.uuid4().hex[:6]}.db"
    seed(db, issues=issues, seed=seed_value, now=now)
    return db, now


def make_spec(**overrides) -> MonitorSpec:
    data = {
        "name": f"test-{uuid.uuid4().hex[:6]}",
        "lead": "lead.core",
        "stalled_after_days": 7,
        "escalate_after_nudges": 2,
        "model": LLMConfig(model=MODEL, max_tokens=256, context_window=16_000),
        "llm_policy": ActivityPolicy(start_to_close_seconds=10, initial_interval_seconds=0.2),
        "tool_policy": ActivityPolicy(start_to_close_seconds=20, initial_interval_seconds=0.2),
    }
    data.update(overrides)
    return MonitorSpec(**data)


def sql(db: Path, query: str, *params):
    conn = sqlite3.connect(str(db))
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def stalled_by_sql(db: Path, spec: MonitorSpec, as_of: datetime) -> list[str]:
    """The stalled set, computed without the monitor: open or in progress, assigned, not updated since the cutoff."""
    cutoff = (as_of - timedelta(days=spec.stalled_after_days)).strftime("%Y-%m-%dT%H:%M:%SZ")
    states = ",".join("?" for _ in spec.states)
    rows = sql(
        db,
        f"SELECT id FROM issues WHERE state IN ({states}) AND assignee IS NOT NULL "
        f"AND updated_at < ? ORDER BY updated_at, id",
        *spec.states,
        cutoff,
    )
    return [r[0] for r in rows]


def nudge_comments(db: Path, author: str = "agentsteps-monitor") -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for issue_id, body in sql(
        db,
        "SELECT issue_id, body FROM comments WHERE author = ? AND body LIKE ? ORDER BY id",
        author,
        f"%{NUDGE_MARKER}%",
    ):
        found.setdefault(issue_id, []).append(body)
    return found


def assignee_of(db: Path, issue_id: str) -> str:
    return sql(db, "SELECT assignee FROM issues WHERE id = ?", issue_id)[0][0]


async def run_tick(client: Client, task_queue: str, spec: MonitorSpec, as_of: datetime | None) -> MonitorReport:
    return await client.execute_workflow(
        MONITOR_WORKFLOW,
        MonitorInput(spec=spec, as_of=as_of),
        id=f"monitor-{uuid.uuid4().hex[:10]}",
        task_queue=task_queue,
        result_type=MonitorReport,
    )


async def _main(address: str, task_queue: str, base_url: str, state_dir: str, db: str) -> None:
    from temporalio.contrib.pydantic import pydantic_data_converter

    from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
    from agentsteps.demos.monitor import monitor_worker, tracker_client, tracker_server

    settings = WorkerSettings(
        state_dir=Path(state_dir),
        task_queue=task_queue,
        providers=ProviderSettings(openai_base_url=base_url, request_timeout_seconds=10),
    )
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    mcp = tracker_client({"tickets": tracker_server(db)}, os.environ["TICKETS_TOKEN"])
    async with monitor_worker(client, settings, mcp, **worker_options()):
        await serve_until_killed()


if __name__ == "__main__":
    run_child(_main, *sys.argv[1:6])
