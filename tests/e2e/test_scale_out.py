"""Three worker processes with separate state directories, one snapshot key and one S3 store
(moto on loopback). Tool-mode and code-mode runs with 300 KB tool results; workers are killed
at random, each time one holding an unmoved run's call, until every run has moved. Every run
completes, every side effect happens once (counted at the tool by idempotency key), and no
payload lands on a worker's disk."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import time

from process_support import STICKY_AFTER_KILL, kill
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures
from scale_helpers import PROGRAM_CALLS, TOOL_CALLS, code_spec, new_id, script, spawn, tool_spec, worker_settings
from scale_support import ROWS, Ledger

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import connect

# Runs per mode (tool mode, code mode): one each in the suite (every run still moves at least once);
# AGENTSTEPS_SCALE_RUNS=2 or more for more runs per worker and more kills (twice the CPU at 2).
RUNS_PER_MODE = int(os.environ.get("AGENTSTEPS_SCALE_RUNS", "1"))
DELAY = 1.5


async def test_runs_survive_random_worker_kills_across_workers_sharing_only_s3_and_a_key(
    temporal_env, scripted, tmp_path, s3_endpoint, s3_bucket
):
    scripted.set_script(script(delay=DELAY))
    address = temporal_env.client.service_client.config.target_host
    queue = new_id("scale")
    s3 = store_settings(s3_endpoint, s3_bucket)
    ledger_path = tmp_path / "ledger.db"
    ledger = Ledger(ledger_path)
    state_dirs = iter(tmp_path / f"worker-{i}" for i in range(100))

    def settings_json() -> str:
        return worker_settings(address, queue, scripted.url_openai, next(state_dirs), s3=s3)

    workers: dict[int, subprocess.Popen] = {}

    def start() -> subprocess.Popen:
        return spawn(settings_json(), ledger_path, env=STICKY_AFTER_KILL)

    for proc in await asyncio.gather(*(asyncio.to_thread(start) for _ in range(3))):
        workers[proc.pid] = proc
    client = await connect(WorkerSettings.model_validate_json(settings_json()))
    specs = {new_id("tools"): tool_spec(DELAY) for _ in range(RUNS_PER_MODE)}
    specs |= {new_id("code"): code_spec(DELAY) for _ in range(RUNS_PER_MODE)}
    results = {
        workflow_id: asyncio.ensure_future(
            (
                await client.start_workflow(
                    AGENT_WORKFLOW,
                    AgentInput(spec=spec, input="export every batch"),
                    id=workflow_id,
                    task_queue=queue,
                    result_type=AgentResult,
                )
            ).result()
        )
        for workflow_id, spec in specs.items()
    }
    moved: set[str] = set()
    kills = 0
    spawning: list[asyncio.Future] = []
    rng = random.Random()
    deadline = time.monotonic() + 240
    try:
        while any(not r.done() for r in results.values()):
            assert time.monotonic() < deadline, f"runs still open; moved so far: {sorted(moved)}"
            for future in [f for f in spawning if f.done()]:
                spawning.remove(future)
                proc = future.result()
                workers[proc.pid] = proc
            in_flight = ledger.in_flight()
            unmoved = [
                w
                for w, r in results.items()
                if w not in moved and not r.done() and in_flight.get(w, set()) & set(workers)
            ]
            if unmoved:
                victim = rng.choice(sorted(in_flight[rng.choice(unmoved)] & set(workers)))
                kill(workers.pop(victim))
                kills += 1
                moved |= {w for w, pids in in_flight.items() if victim in pids}
                # A replacement with a fresh, empty state directory: only S3 and the key are shared.
                spawning.append(asyncio.ensure_future(asyncio.to_thread(start)))
            await asyncio.sleep(0.1)
        outcomes = {w: r.result() for w, r in results.items()}
    finally:
        for future in spawning:
            proc = await future
            workers[proc.pid] = proc
        for proc in workers.values():
            kill(proc)

    for workflow_id, result in outcomes.items():
        assert result.status == "completed", workflow_id
        calls = TOOL_CALLS if workflow_id.startswith("tools") else PROGRAM_CALLS
        assert result.output == ("done" if calls == TOOL_CALLS else calls * ROWS)
        # One side effect per logical call: a repeated call would carry a new key and show up twice.
        assert ledger.effects(workflow_id) == list(range(1, calls + 1)), workflow_id
    assert moved == set(outcomes), f"every run moved at least once ({kills} kills)"
    for workflow_id in outcomes:
        assert len(ledger.pids(workflow_id)) >= 2, f"{workflow_id} ran on one worker only"
    assert not any(tmp_path.glob("worker-*/payloads/sha256/*/*")), "no payload on a worker's disk"
    stored = s3_client(s3_endpoint).list_objects_v2(Bucket=s3_bucket)["KeyCount"]
    assert stored >= RUNS_PER_MODE * (TOOL_CALLS + PROGRAM_CALLS), "the 300 KB results went through S3"
