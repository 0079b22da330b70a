"""Session history per LLM call: stored conversation (SessionWorkflow) against the full message list.

One session of N turns (scripted model; each turn is one ~2 KB tool call and
an answer, so two LLM calls) runs interleaved, turn by turn, with the
baseline: the same step engine sending the whole message list in every
``llm.call`` (``full_list_session.py``). Both run on one dev server and one
worker. Per LLM call it reports the bytes a turn adds to workflow history,
and the same plus what the turn added to the payload store (the baseline's
inputs spill there past 256 KiB), at turns 10, 100 and N, and the step time
(turn wall time per LLM call) at turns 10 and N: each figure is the median of
the five turns ending there. The baseline dies when its history passes
Temporal's 50 MB limit (about turn 140 here); its ratios are then taken at the
last turn it finished, and ``baseline.failed_at_turn`` says when. The last
line is one JSON object.

``--tickets`` gives both sides the bundled ticket tracker's four MCP tools
too (over stdio, as a worker's config file declares them; the model never
calls them): a session whose tool catalog is the size of a typical MCP
server's, about 6.7 KB of schemas.

    .venv/bin/python bench/session_history.py [--turns 200] [--tickets]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from full_list_session import BASELINE_WORKFLOW, FullListSession
from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.dev_server import SERVER_STARTUP, temporal_binary
from agentsteps.client.sessions import continue_session, send_turn
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.names import TURN_UPDATE
from agentsteps.contracts.session import TurnInput, TurnResult
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.worker import running_worker

TICKET_TOOLS = ["list_issues", "get_issue", "add_comment", "update_issue"]
CALLS_PER_TURN = 2
WINDOW = 5
SCRIPT = {
    "rules": [
        {"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "fetch_report", "arguments": {"day": 1}}]}},
        {"match": {"tool_result_for": "fetch_report"}, "reply": {"content": "Report read; nothing unusual."}},
    ]
}


class Day(BaseModel):
    day: int


class Report(BaseModel):
    day: int
    text: str


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool()
    def fetch_report(query: Day) -> Report:
        """The day's report (about 2 KB)."""
        return Report(day=query.day, text=("All queues nominal; " * 110)[:2000])

    return tools


async def history_bytes(client: Client, workflow_id: str) -> tuple[str, int]:
    info = (await client.get_workflow_handle(workflow_id).describe()).raw_description.workflow_execution_info
    return info.execution.run_id, info.history_size_bytes


def store_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class Meter:
    """Per-turn bytes and time for one side of the comparison."""

    def __init__(self, client: Client, workflow_id: str, store: Path) -> None:
        self.client, self.workflow_id, self.store = client, workflow_id, store
        self.history: dict[int, float] = {}
        self.total: dict[int, float] = {}
        self.step_ms: dict[int, float] = {}

    async def turn(self, n: int, send, measure_store: bool) -> None:
        run_before, before = await history_bytes(self.client, self.workflow_id)
        stored_before = store_bytes(self.store) if measure_store else 0
        t0 = time.perf_counter()
        await send()
        elapsed = time.perf_counter() - t0
        run_after, after = await history_bytes(self.client, self.workflow_id)
        self.step_ms[n] = 1000 * elapsed / CALLS_PER_TURN
        if run_after == run_before:  # a continue-as-new in between resets the counter: skip the turn
            self.history[n] = (after - before) / CALLS_PER_TURN
            if measure_store:
                self.total[n] = self.history[n] + (store_bytes(self.store) - stored_before) / CALLS_PER_TURN

    def at(self, series: dict[int, float], turn: int) -> float:
        values = [series[t] for t in range(turn - WINDOW + 1, turn + 1) if t in series]
        return statistics.median(values)


def tickets_config(state: Path) -> Path:
    """A worker config file declaring the bundled ticket tracker as an MCP server (stdio, no token: loopback)."""
    args = [
        "-m",
        "agentsteps.examples.tickets",
        "--transport",
        "stdio",
        "--db",
        str(state / "tickets.db"),
        "--seed-issues",
        "10",
        "--insecure-no-auth",
    ]
    path = state / "agentsteps.toml"
    path.write_text(
        f'[mcp.servers.tickets]\ntransport = "stdio"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = {json.dumps(args)}\n"
    )
    return path


async def main(turns: int, tickets: bool = False) -> dict:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        data_converter=pydantic_data_converter,
    )
    marks = [10, 100, turns] if turns >= 100 else [10, turns]
    measured = {t for m in marks for t in range(m - WINDOW + 1, m + 1)}
    with tempfile.TemporaryDirectory() as state, ScriptedModelServer(SCRIPT) as scripted:
        settings = WorkerSettings(
            state_dir=Path(state),
            task_queue=f"bench-{uuid.uuid4().hex[:6]}",
            providers=ProviderSettings(openai_base_url=scripted.url_openai),
            config_file=tickets_config(Path(state)) if tickets else None,
        )
        store = Path(state) / "payloads"
        spec = AgentSpec(
            name="bench",
            model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=10_000_000),
            tools=["fetch_report", *(TICKET_TOOLS if tickets else [])],
            max_steps=4,
            token_budget=10**9,
        )
        baseline_died: int | None = None
        session_id = f"bench-session-{uuid.uuid4().hex[:8]}"
        baseline_id = f"bench-baseline-{uuid.uuid4().hex[:8]}"
        async with running_worker(env.client, settings, registry=registry(), extra_workflows=[FullListSession]):
            await send_turn(env.client, spec, "warm up", session_id=session_id, task_queue=settings.task_queue)
            baseline: WorkflowHandle = await env.client.start_workflow(
                BASELINE_WORKFLOW, spec, id=baseline_id, task_queue=settings.task_queue
            )
            await baseline.execute_update(TURN_UPDATE, TurnInput(input="warm up"), result_type=TurnResult)
            ours, theirs = Meter(env.client, session_id, store), Meter(env.client, baseline_id, store)
            for n in range(1, turns + 1):
                text = f"turn {n}: read today's report"
                await ours.turn(n, lambda: continue_session(env.client, session_id, text), n in measured)
                if baseline_died is None:
                    try:
                        await theirs.turn(
                            n,
                            lambda: baseline.execute_update(TURN_UPDATE, TurnInput(input=text), result_type=TurnResult),
                            True,
                        )
                    except WorkflowUpdateFailedError as exc:
                        # Every llm.call carries the whole conversation: history reaches Temporal's limit.
                        baseline_died = n
                        print(f"turn {n}: baseline failed ({exc.cause}); history limit reached", flush=True)
                if n in marks and n in theirs.history:
                    print(
                        f"turn {n}: session {ours.at(ours.history, n):.0f} B/call history, "
                        f"{ours.at(ours.total, n):.0f} with store, {ours.at(ours.step_ms, n):.1f} ms/call | "
                        f"baseline {theirs.at(theirs.history, n):.0f} B/call history, "
                        f"{theirs.at(theirs.total, n):.0f} with store, {theirs.at(theirs.step_ms, n):.1f} ms/call",
                        flush=True,
                    )
            if baseline_died is None:
                await baseline.signal("finish")
            else:
                print(
                    f"turn {turns}: session {ours.at(ours.history, turns):.0f} B/call history; "
                    f"baseline died at turn {baseline_died}",
                    flush=True,
                )
    await env.shutdown()

    def side(meter: Meter, last: int) -> dict:
        """Figures at the marks the side reached; ratios between turn 10 and ``last``."""
        reached = [m for m in marks if m <= last] + ([last] if last not in marks else [])
        return {
            "last_turn": last,
            "history_bytes_per_call": {str(m): round(meter.at(meter.history, m)) for m in reached},
            "bytes_per_call_with_store": {str(m): round(meter.at(meter.total, m)) for m in reached},
            "step_ms": {str(m): round(meter.at(meter.step_ms, m), 2) for m in (marks[0], last)},
            "bytes_per_call_ratio": round(meter.at(meter.total, last) / meter.at(meter.total, marks[0]), 3),
            "history_bytes_per_call_ratio": round(meter.at(meter.history, last) / meter.at(meter.history, marks[0]), 3),
            "step_time_ratio": round(meter.at(meter.step_ms, last) / meter.at(meter.step_ms, marks[0]), 3),
        }

    session = side(ours, turns)
    base = side(theirs, turns if baseline_died is None else baseline_died - 1)
    base["failed_at_turn"] = baseline_died
    return {
        "turns": turns,
        "tools": len(spec.tools),
        "session.bytes_per_call_ratio": session["bytes_per_call_ratio"],
        "session.step_time_ratio": session["step_time_ratio"],
        "baseline.bytes_per_call_ratio": base["bytes_per_call_ratio"],
        "baseline.step_time_ratio": base["step_time_ratio"],
        "target_ratio": 1.2,
        "session": session,
        "baseline": base,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--tickets", action="store_true", help="the ticket tracker's MCP tools too (~6.7 KB)")
    args = parser.parse_args()
    summary = asyncio.run(main(args.turns, args.tickets))
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
