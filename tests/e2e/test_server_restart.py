"""The Temporal server SIGKILLed and restarted mid-run (dev server on a SQLite file): the runs
complete on the same worker and no side effect repeats (counted at the tool by idempotency key)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from pathlib import Path

from process_support import kill, wait_for
from scale_helpers import PROGRAM_CALLS, TOOL_CALLS, code_spec, new_id, script, spawn, tool_spec, worker_settings
from scale_support import ROWS, Ledger

from agentsteps.client.dev_server import temporal_binary
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import connect

DELAY = 1.5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(port: int, db: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--headless",
            "--db-filename",
            str(db),
            "--log-level",
            "error",
            "--namespace",
            "default",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        assert proc.poll() is None and time.monotonic() < deadline, "the dev server did not start"
        time.sleep(0.1)


async def test_runs_complete_across_a_sigkilled_and_restarted_server_without_repeating(scripted, tmp_path):
    scripted.set_script(script(delay=DELAY))
    port, db = _free_port(), tmp_path / "temporal.db"
    server = _start_server(port, db)
    address = f"127.0.0.1:{port}"
    queue = new_id("restart")
    settings = worker_settings(address, queue, scripted.url_openai, tmp_path / "worker", single_worker=True)
    ledger_path = tmp_path / "ledger.db"
    ledger = Ledger(ledger_path)
    worker = None
    try:
        worker = await asyncio.to_thread(spawn, settings, ledger_path)
        client = await connect(WorkerSettings.model_validate_json(settings))
        specs = {new_id("tools"): tool_spec(DELAY), new_id("code"): code_spec(DELAY)}
        handles = {
            workflow_id: await client.start_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=spec, input="export"),
                id=workflow_id,
                task_queue=queue,
                result_type=AgentResult,
            )
            for workflow_id, spec in specs.items()
        }
        # Mid-run: every run has made a side effect, none is done.
        await wait_for(lambda: all(ledger.effects(w) for w in specs), timeout=90)
        kill(server)  # SIGKILL: no shutdown, only what SQLite already holds survives
        await asyncio.sleep(1.0)
        server = await asyncio.to_thread(_start_server, port, db)
        outcomes = {w: await asyncio.wait_for(h.result(), timeout=180) for w, h in handles.items()}
    finally:
        if worker is not None:
            kill(worker)
        kill(server)

    for workflow_id, result in outcomes.items():
        calls = TOOL_CALLS if workflow_id.startswith("tools") else PROGRAM_CALLS
        assert result.status == "completed"
        assert result.output == ("done" if calls == TOOL_CALLS else calls * ROWS)
        assert ledger.effects(workflow_id) == list(range(1, calls + 1)), "each side effect once"
