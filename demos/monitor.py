"""One stalled-ticket monitor tick for ``agentsteps demo``, and the worker it needs.

``demo_monitor_tick`` seeds a fresh tracker, launches it over stdio as an MCP
server (its API token is a worker secret), runs one ``StalledTicketMonitor``
tick on its own worker and prints the report. Offline it drafts nudges with
the scripted model: the script holds one rule per assigned issue whose reply
names that issue's assignee (the test double knows the tracker's users; a
real model reads them from the prompt).
"""

from __future__ import annotations

import secrets as _secrets
import sqlite3
import sys
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from temporalio.client import Client
from temporalio.worker import Worker

from ..activities.mcp import McpSessionPool, McpToolClient, McpToolSource, SecretResolver
from ..activities.tools.registry import ToolRegistry
from ..contracts.config.mcp_config import parse_mcp_config
from ..contracts.config.settings import WorkerSettings
from ..contracts.llm.request import LLMConfig
from ..contracts.monitor import MonitorInput, MonitorReport, MonitorSpec
from ..contracts.names import MONITOR_WORKFLOW
from ..worker import running_worker
from ..workflows.monitor.nudges import NUDGE_MARKER

SCRIPTED_MODEL = "scripted-2026-01-01"
OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
ANTHROPIC_MODEL = "claude-3-5-haiku-20241022"
TOKEN_SECRET = "TICKETS_API_TOKEN"
EXPECTED_SECRET = "TICKETS_EXPECTED_TOKEN"


def tracker_server(db: Path | str) -> dict[str, Any]:
    """The ``[mcp.servers.tickets]`` table launching the bundled tracker over stdio."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", "agentsteps.examples.tickets", "--transport", "stdio", "--db", str(db)],
        "env": {"TICKETS_API_TOKEN": f"secret:{TOKEN_SECRET}", "TICKETS_EXPECTED_TOKEN": f"secret:{EXPECTED_SECRET}"},
    }


def tracker_client(servers: dict[str, dict[str, Any]], token: str) -> McpToolClient:
    config = parse_mcp_config({"mcp": {"servers": servers}})
    return McpToolClient(McpSessionPool(config, SecretResolver(env={TOKEN_SECRET: token, EXPECTED_SECRET: token})))


def nudge_reply(issue_id: str, assignee: str) -> dict[str, Any]:
    message = (
        f"Hi @{assignee}, {issue_id} has been quiet for a while. "
        "Could you post a short status update, or hand it over if you are blocked?"
    )
    return {"json": {"issue_id": issue_id, "message": message}}


def nudge_script(issues: Iterable[tuple[str, str]], *, off_contract_first: Iterable[str] = ()) -> dict[str, Any]:
    """A scripted-model script answering each nudge prompt for ``(issue_id, assignee)``.

    A rule matches on ``issue_id "<id>"`` anywhere in the conversation (the
    quotes keep PROJ-1 from matching PROJ-12), so a re-prompt for that issue
    matches it too. Issues in ``off_contract_first`` first get a draft that
    does not name the assignee, which the contract rejects.
    """
    wrong = set(off_contract_first)
    rules: list[dict[str, Any]] = []
    for issue_id, assignee in issues:
        match = {"any_contains": f'issue_id "{issue_id}"'}
        if issue_id in wrong:
            rules.append(
                {
                    "match": match,
                    "times": 1,
                    "reply": {
                        "json": {"issue_id": issue_id, "message": f"{issue_id} looks stalled, please take a look."}
                    },
                }
            )
        rules.append({"match": match, "reply": nudge_reply(issue_id, assignee)})
    return {"rules": rules}


def assigned_issues(db: Path | str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(str(db))
    try:
        return [(r[0], r[1]) for r in conn.execute("SELECT id, assignee FROM issues WHERE assignee IS NOT NULL")]
    finally:
        conn.close()


@asynccontextmanager
async def monitor_worker(
    client: Client,
    settings: WorkerSettings,
    mcp: McpToolClient,
    *,
    task_queue: str | None = None,
    **worker_options: Any,
) -> AsyncIterator[Worker]:
    """The standard worker, with the tracker as an extra tool source and no Python tools."""
    async with running_worker(
        client,
        settings,
        registry=ToolRegistry(),
        sources=[McpToolSource(mcp)],
        task_queue=task_queue,
        **worker_options,
    ) as worker:
        yield worker


def demo_spec(settings: WorkerSettings, *, lead: str = "lead.core") -> MonitorSpec:
    if settings.providers.openai_api_key:
        model = LLMConfig(model=OPENAI_MODEL, max_tokens=300)
    elif settings.providers.anthropic_api_key:
        model = LLMConfig(provider="anthropic", model=ANTHROPIC_MODEL, max_tokens=300, context_window=200_000)
    else:
        model = LLMConfig(model=SCRIPTED_MODEL, max_tokens=300, context_window=16_000)
    return MonitorSpec(
        name="demo-stalled-tickets",
        project="PROJ",
        lead=lead,
        stalled_after_days=14,
        max_actions_per_tick=8,
        model=model,
    )


async def demo_monitor_tick(
    client: Client,
    settings: WorkerSettings,
    *,
    out: TextIO | None = None,
    issues: int = 400,
    spec: MonitorSpec | None = None,
) -> MonitorReport:
    """Seed a fresh tracker under ``settings.state_dir``, run one tick against it, print and return the report."""
    from ..examples.tickets.seed import seed
    from ..scripted_model import ScriptedModelServer

    out = out or sys.stdout
    now = datetime.now(UTC).replace(microsecond=0)
    directory = Path(settings.state_dir) / "monitor-demo"
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / f"tickets-{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:4]}.db"
    seed(db, issues=issues, seed=7, now=now)
    spec = spec or demo_spec(settings)
    print(f"\nStalled-ticket monitor: one tick against a fresh tracker ({issues} issues, {db})", file=out)
    print(
        f"  stalled = {'/'.join(spec.states)}, assigned, no update for {spec.stalled_after_days} days"
        f" in project {spec.project or 'any'}; escalate after {spec.escalate_after_nudges} nudges",
        file=out,
        flush=True,
    )

    token = _secrets.token_hex(16)
    async with AsyncExitStack() as stack:
        if not (settings.providers.openai_api_key or settings.providers.anthropic_api_key):
            scripted = stack.enter_context(ScriptedModelServer(nudge_script(assigned_issues(db))))
            settings = settings.model_copy(
                update={"providers": settings.providers.model_copy(update={"openai_base_url": scripted.url_openai})}
            )
        mcp = tracker_client({"tickets": tracker_server(db)}, token)
        stack.push_async_callback(mcp.aclose)
        task_queue = f"{settings.task_queue}-monitor-demo-{uuid.uuid4().hex[:8]}"
        await stack.enter_async_context(monitor_worker(client, settings, mcp, task_queue=task_queue))
        report: MonitorReport = await client.execute_workflow(
            MONITOR_WORKFLOW,
            MonitorInput(spec=spec),
            id=f"monitor-demo-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
            result_type=MonitorReport,
        )
    print_report(report, out)
    sample = _sample_nudge(db, report)
    if sample:
        print(f"  sample nudge on {sample[0]}:\n    " + sample[1].replace("\n", "\n    "), file=out)
    return report


def print_report(report: MonitorReport, out: TextIO) -> None:
    def ids(values: list[str]) -> str:
        return ", ".join(values[:8]) + (f" (+{len(values) - 8} more)" if len(values) > 8 else "")

    counts = report.counts
    print(
        f"  tick {report.day}: {counts['stalled']} stalled, {counts['nudged']} nudged, "
        f"{counts['escalated']} escalated, {counts['deferred']} deferred to later ticks, "
        f"{counts['failed']} failed; {report.reprompts} re-prompts, {report.usage.total_tokens} tokens",
        file=out,
    )
    print(
        f"  the scan program made {report.scan_tool_calls} tracker calls in the sandbox; the model only read "
        f"one short prompt per nudge",
        file=out,
    )
    for label, values in (
        ("nudged", report.nudged),
        ("escalated", report.escalated),
        ("already nudged today", report.nudged_today),
    ):
        if values:
            print(f"  {label}: {ids(values)}", file=out)
    for failure in report.failed[:5]:
        print(f"  failed {failure.issue_id}: {failure.reason}", file=out)


def _sample_nudge(db: Path, report: MonitorReport) -> tuple[str, str] | None:
    if not report.nudged:
        return None
    conn = sqlite3.connect(str(db))
    try:
        row = conn.execute(
            "SELECT body FROM comments WHERE issue_id = ? AND body LIKE ? ORDER BY id DESC LIMIT 1",
            (report.nudged[0], f"%{NUDGE_MARKER}%"),
        ).fetchone()
    finally:
        conn.close()
    return (report.nudged[0], row[0]) if row else None


__all__ = [
    "assigned_issues",
    "demo_monitor_tick",
    "demo_spec",
    "monitor_worker",
    "nudge_script",
    "print_report",
    "tracker_client",
    "tracker_server",
]
