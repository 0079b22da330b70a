"""Agent step overhead against the bare Temporal activity round trip.

Both are measured in one process, against one dev server, interleaved, so the
machine's noise hits both alike. An agent step with one tool call is two
activities (``llm.call`` over real HTTP to the scripted model, then
``tools.call``), after the run's one ``tools.describe``; the bare baseline
(``BareAgentShape``) runs the same shape with no-op activities.
The scripted model (zero delay) runs in its own process, as a model endpoint
does, so its HTTP thread never competes with the worker for the GIL. Each
step count is measured in turn (20 and 200 by default: the history grows
with every step, so a per-step cost that grows with it shows at 200). The dev
server runs with the transfer-task poll cap lifted (``dev_server_args``);
``--capped`` keeps the default, under which both sides cost ~100 ms a step.
Every line names the bare baseline it ran against. The last line is one JSON
object: per step count, the agent step, the bare round trip and their ratio.

    .venv/bin/python bench/step_overhead.py [--steps 20,200] [--rounds 5] [--capped]
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

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.client.dev_server import dev_server_args, temporal_binary
from agentsteps.worker import running_worker
from bare_workflow import BareAgentShape, noop
from model_process import free_port, openai_url, scripted_model_process


def _script(steps: int) -> dict:
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    return {
        "rules": [
            {"match": {"role": "user"}, "reply": call},
            {"match": {"tool_result_for": "get_weather"}, "times": steps - 1, "reply": call},
        ],
        "default": {"content": "done"},
    }


async def measure(env: WorkflowEnvironment, port: int, task_queue: str, steps: int, rounds: int) -> dict:
    """Agent and bare runs of ``steps`` steps, interleaved; medians over ``rounds`` after a warm-up."""
    spec = AgentSpec(
        name="bench",
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=128_000),
        tools=["get_weather"],
        max_steps=steps + 1,
        token_budget=10**9,  # the history grows each step; the budget is not what is measured
    )
    agent_times: list[float] = []
    bare_times: list[float] = []
    for round_ in range(rounds + 1):  # round 0 warms both paths up
        with scripted_model_process(_script(steps), port):  # a fresh script: its counters start at zero
            t0 = time.perf_counter()
            result = await env.client.execute_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=spec, input="weather"),
                id=f"bench-agent-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
                result_type=AgentResult,
            )
            t1 = time.perf_counter()
        await env.client.execute_workflow(
            BareAgentShape.run, steps, id=f"bench-bare-{uuid.uuid4().hex[:8]}", task_queue=task_queue + "-bare",
        )
        t2 = time.perf_counter()
        assert result.status == "completed" and len(result.steps) == steps + 1, result.status
        if round_:
            agent_times.append((t1 - t0) / (steps + 1))
            bare_times.append((t2 - t1) / (steps + 1))
        print(f"{steps} steps, round {round_}: agent step {1000 * (t1 - t0) / (steps + 1):.1f} ms, "
              f"bare {1000 * (t2 - t1) / (steps + 1):.1f} ms", file=sys.stderr, flush=True)
    agent = statistics.median(agent_times)
    bare = statistics.median(bare_times)
    return {"agent_step_ms": round(agent * 1000, 2), "bare_round_trip_ms": round(bare * 1000, 2),
            "ratio": round(agent / bare, 3), "steps_per_run": steps + 1}


async def main(step_counts: list[int], rounds: int, capped: bool) -> dict:
    extra = [] if capped else dev_server_args()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(), data_converter=pydantic_data_converter,
        dev_server_extra_args=extra, dev_server_log_level="error",
    )
    by_steps: dict[str, dict] = {}
    port = free_port()
    with tempfile.TemporaryDirectory() as state:
        settings = WorkerSettings(
            state_dir=Path(state),
            task_queue=f"bench-{uuid.uuid4().hex[:6]}",
            providers=ProviderSettings(openai_base_url=openai_url(port)),
        )
        bare_worker = Worker(
            env.client, task_queue=settings.task_queue + "-bare", workflows=[BareAgentShape], activities=[noop]
        )
        async with running_worker(env.client, settings), bare_worker:
            for steps in step_counts:
                by_steps[str(steps)] = figure = await measure(env, port, settings.task_queue, steps, rounds)
                print(f"{steps} steps: agent {figure['agent_step_ms']} ms/step against the bare baseline "
                      f"{figure['bare_round_trip_ms']} ms/step: ratio {figure['ratio']}", file=sys.stderr, flush=True)
    await env.shutdown()
    first = by_steps[str(step_counts[0])]
    return {
        **first,
        "by_steps": by_steps,
        "server": "dev server, default transfer-task poll cap" if capped else "dev server, poll cap lifted",
        "dev_server_args": extra,
        "rounds": rounds,
        "target_ratio": 1.25,
        "target_met": all(f["ratio"] <= 1.25 for f in by_steps.values()),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", default="20,200", help="comma-separated step counts, each measured in turn")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--capped", action="store_true",
                        help="keep the dev server's default transfer-task poll cap (to see what it costs)")
    args = parser.parse_args()
    summary = asyncio.run(main([int(n) for n in args.steps.split(",")], args.rounds, args.capped))
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
