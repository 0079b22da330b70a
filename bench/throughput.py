"""Throughput: concurrent agent runs against the hand-written loop and bare workflows of the same shape.

On one dev server (transfer-task poll cap lifted), with 1, 2 and 3 worker
processes in turn (``throughput_worker.py``: each serves the engine, the
hand-written loop and the bare baseline), ``--runs`` runs of each side are
started at once and timed to the last result. An agent run here is three
steps with one tool call each, then the final answer, from the scripted model
(zero delay, its own process); the hand-written loop
(``handwritten_workflow.py``: message list in the workflow, the official
``openai`` SDK in one activity, one activity per tool call) runs the same
conversation, and ``BareAgentShape`` the agent's activity shape with no-ops.
With ``--rounds`` the sides rotate which goes first, and runs/s is total runs
over total time.

CPU seconds per run are the worker processes', the Temporal server's and the
scripted model's, read from /proc. The last line is one JSON object: runs/s
per side, ``ratio_vs_handwritten`` and ``ratio_by_workers`` (agent / bare),
each round's own agent ÷ hand-written ratio (``ratio_vs_handwritten_by_round``)
and their median, CPU seconds per run, and Temporal billable actions of each
side's last run.

    .venv/bin/python bench/throughput.py [--runs 200] [--workers 1,2,3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bare_workflow import BareAgentShape
from billable import billable_actions
from cpu import cpu_seconds, temporal_server_pids
from handwritten_workflow import HandwrittenAgentLoop
from model_process import free_port, scripted_model_process
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.client.runs import start_agent_run
from agentsteps.contracts import AgentSpec, LLMConfig

HERE = Path(__file__).resolve().parent
STEPS = 3
CITIES = ["Paris", "Tokyo", "London"]
TARGET = 1.05
"""Runs/s against the hand-written loop (issue 39; was 1.0)."""


def script() -> dict[str, Any]:
    """Stateless, so one model process serves every concurrent run: each tool result names the next city."""

    def call(city: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "get_weather", "arguments": {"city": city}}]}

    rules = [{"match": {"role": "user"}, "reply": call(CITIES[0])}]
    rules += [{"match": {"contains": a}, "reply": call(b)} for a, b in zip(CITIES, CITIES[1:])]
    rules.append({"match": {"contains": CITIES[-1]}, "reply": {"content": "done"}})
    return {"rules": rules}


SPEC = AgentSpec(
    name="throughput",
    model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=32_000),
    tools=["get_weather"],
    max_steps=STEPS + 1,
)


@contextmanager
def worker_processes(count: int, address: str, task_queue: str, base_url: str, state: Path) -> Iterator[list[int]]:
    procs = []
    try:
        for i in range(count):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(HERE / "throughput_worker.py"),
                        address,
                        task_queue,
                        base_url,
                        str(state),  # one store and key for every worker, as a deployment shares them
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=HERE,
                )
            )
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"worker process exited with {proc.wait()}")
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


SIDES = ("agent", "handwritten", "bare")
LAST_IDS: dict[str, str] = {}
"""The latest run of each side, whose history billable_actions reads."""


async def agent_run(client: Client, task_queue: str) -> None:
    LAST_IDS["agent"] = workflow_id = f"tp-agent-{uuid.uuid4().hex[:12]}"
    # As a backend starts one: the console's search attributes go with the start.
    handle = await start_agent_run(
        client, SPEC, "weather in three cities", task_queue=task_queue, workflow_id=workflow_id
    )
    result = await handle.result()
    assert result.status == "completed" and len(result.steps) == STEPS + 1, (result.status, len(result.steps))


async def handwritten_run(client: Client, task_queue: str) -> None:
    LAST_IDS["handwritten"] = workflow_id = f"tp-hand-{uuid.uuid4().hex[:12]}"
    calls = await client.execute_workflow(
        HandwrittenAgentLoop.run,
        args=["weather in three cities", STEPS + 1],
        id=workflow_id,
        task_queue=f"{task_queue}-hand",
    )
    assert calls == STEPS + 1, calls


async def bare_run(client: Client, task_queue: str) -> None:
    LAST_IDS["bare"] = workflow_id = f"tp-bare-{uuid.uuid4().hex[:12]}"
    await client.execute_workflow(BareAgentShape.run, STEPS, id=workflow_id, task_queue=f"{task_queue}-bare")


RUNS = {"agent": agent_run, "handwritten": handwritten_run, "bare": bare_run}


async def batch(run: Callable[[], Awaitable[None]], runs: int, pids: dict[str, list[int]]) -> dict[str, float]:
    """``runs`` runs started at once, timed to the last result; CPU seconds by process kind."""
    before = {kind: sum(cpu_seconds(p) for p in ps) for kind, ps in pids.items()}
    started = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(runs)))
    figure = {"seconds": time.perf_counter() - started}
    for kind, ps in pids.items():
        figure[kind] = sum(cpu_seconds(p) for p in ps) - before[kind]
    return figure


def summary(batches: list[dict[str, float]], runs: int) -> dict[str, float]:
    """Runs/s over every batch of a side (total runs / total time) and CPU seconds per run by process kind."""
    total = runs * len(batches)
    seconds = sum(b["seconds"] for b in batches)
    figure = {"runs_per_s": round(total / seconds, 2), "seconds": round(seconds, 2)}
    for kind in (k for k in batches[0] if k != "seconds"):
        figure[f"{kind}_cpu_s_per_run"] = round(sum(b[kind] for b in batches) / total, 4)
    figure["cpu_s_per_run"] = round(sum(v for k, v in figure.items() if k.endswith("_cpu_s_per_run")), 4)
    return figure


async def main(runs: int, worker_counts: list[int], rounds: int) -> dict[str, Any]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    address = env.client.service_client.config.target_host
    server = temporal_server_pids()
    by_side: dict[str, dict[str, Any]] = {side: {} for side in SIDES}
    by_round: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as state, scripted_model_process(script(), free_port()) as model:
        for count in worker_counts:
            task_queue = f"tp-{count}-{uuid.uuid4().hex[:6]}"
            with worker_processes(count, address, task_queue, model.url, Path(state)) as workers:
                pids = {"worker": workers, "server": server, "model": [model.pid]}
                # Warm-up (not timed): sandbox imports, tokenizer, connections in every process.
                await asyncio.gather(*(RUNS[side](env.client, task_queue) for side in SIDES for _ in range(4 * count)))
                batches: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
                for round_ in range(rounds):
                    # Rotate which side goes first, so load that drifts during a run hits every side alike.
                    for side in SIDES[round_ % 3 :] + SIDES[: round_ % 3]:
                        run = RUNS[side]
                        batches[side].append(await batch(lambda: run(env.client, task_queue), runs, pids))
                for side in SIDES:
                    by_side[side][str(count)] = summary(batches[side], runs)
                # A round runs every side back to back, so its ratio shares that moment's load: the spread
                # of these says how far the totals above can move at this load.
                by_round[str(count)] = [
                    round(h["seconds"] / a["seconds"], 3) for a, h in zip(batches["agent"], batches["handwritten"])
                ]
            a, h, b = (by_side[side][str(count)] for side in SIDES)
            print(
                f"{count} worker process(es): agent {a['runs_per_s']} runs/s against the hand-written loop "
                f"{h['runs_per_s']} (ratio {a['runs_per_s'] / h['runs_per_s']:.3f}) and the bare baseline "
                f"{b['runs_per_s']} (ratio {a['runs_per_s'] / b['runs_per_s']:.3f}); CPU s/run agent "
                f"{a['cpu_s_per_run']} (workers {a['worker_cpu_s_per_run']}, server {a['server_cpu_s_per_run']}, "
                f"model {a['model_cpu_s_per_run']}), hand-written {h['cpu_s_per_run']} (workers "
                f"{h['worker_cpu_s_per_run']}, server {h['server_cpu_s_per_run']}, model "
                f"{h['model_cpu_s_per_run']}), bare {b['cpu_s_per_run']}",
                file=sys.stderr,
                flush=True,
            )
    billable = {side: await billable_actions(env.client, LAST_IDS[side]) for side in SIDES}
    await env.shutdown()
    agent, hand, bare = (by_side[side] for side in SIDES)
    return {
        "runs": runs,
        "rounds": rounds,
        "steps_per_run": STEPS,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        **by_side,
        "ratio_by_workers": {k: round(agent[k]["runs_per_s"] / bare[k]["runs_per_s"], 3) for k in agent},
        "ratio_vs_handwritten": {k: round(agent[k]["runs_per_s"] / hand[k]["runs_per_s"], 3) for k in agent},
        "ratio_vs_handwritten_by_round": by_round,
        "ratio_vs_handwritten_median_of_rounds": {k: statistics.median(v) for k, v in by_round.items()},
        "cpu_ratio_vs_handwritten": {k: round(agent[k]["cpu_s_per_run"] / hand[k]["cpu_s_per_run"], 3) for k in agent},
        "billable_actions_per_run": billable,
        "target_ratio_vs_handwritten": TARGET,
        "target_met": all(agent[k]["runs_per_s"] >= TARGET * hand[k]["runs_per_s"] for k in agent),
        "dev_server_args": dev_server_args(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", default="1,2,3", help="comma-separated worker process counts")
    parser.add_argument("--rounds", type=int, default=2, help="batches of each side per worker count, order rotating")
    args = parser.parse_args()
    result = asyncio.run(main(args.runs, [int(n) for n in args.workers.split(",")], args.rounds))
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
