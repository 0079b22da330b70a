"""Agent step overhead against the bare Temporal activity round trip.

Both are measured in one process, against one dev server, interleaved, so the
machine's noise hits both alike. An agent step with one tool call is two
activities (``llm.call`` over real HTTP to the scripted model, then
``tools.call``); the bare baseline runs the same shape with no-op activities.
The last line is one JSON object: the per-step times and their ratio.

    .venv/bin/python bench/step_overhead.py [--steps 20] [--rounds 5]
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
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.client.dev_server import dev_server_args, temporal_binary
from agentsteps.worker import running_worker
from bare_workflow import BareRoundTrips, noop


def _script(steps: int) -> dict:
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    return {
        "rules": [
            {"match": {"role": "user"}, "reply": call},
            {"match": {"tool_result_for": "get_weather"}, "times": steps - 1, "reply": call},
        ],
        "default": {"content": "done"},
    }


async def main(steps: int, rounds: int) -> dict:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(), data_converter=pydantic_data_converter,
        dev_server_extra_args=dev_server_args(),
    )
    agent_times: list[float] = []
    bare_times: list[float] = []
    with tempfile.TemporaryDirectory() as state, ScriptedModelServer(_script(steps)) as scripted:
        settings = WorkerSettings(
            state_dir=Path(state),
            task_queue=f"bench-{uuid.uuid4().hex[:6]}",
            providers=ProviderSettings(openai_base_url=scripted.url_openai),
        )
        spec = AgentSpec(
            name="bench",
            model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=64_000),
            tools=["get_weather"],
            max_steps=steps + 1,
        )
        bare_worker = Worker(
            env.client, task_queue=settings.task_queue + "-bare", workflows=[BareRoundTrips], activities=[noop]
        )
        async with running_worker(env.client, settings), bare_worker:
            for round_ in range(rounds + 1):  # round 0 warms both paths up
                scripted.set_script(_script(steps))
                t0 = time.perf_counter()
                result = await env.client.execute_workflow(
                    AGENT_WORKFLOW,
                    AgentInput(spec=spec, input="weather"),
                    id=f"bench-agent-{uuid.uuid4().hex[:8]}",
                    task_queue=settings.task_queue,
                    result_type=AgentResult,
                )
                t1 = time.perf_counter()
                await env.client.execute_workflow(
                    BareRoundTrips.run, steps, id=f"bench-bare-{uuid.uuid4().hex[:8]}",
                    task_queue=settings.task_queue + "-bare",
                )
                t2 = time.perf_counter()
                assert result.status == "completed" and len(result.steps) == steps + 1, result.status
                if round_:
                    agent_times.append((t1 - t0) / (steps + 1))
                    bare_times.append((t2 - t1) / (steps + 1))
                print(f"round {round_}: agent step {1000 * (t1 - t0) / (steps + 1):.1f} ms, "
                      f"bare {1000 * (t2 - t1) / (steps + 1):.1f} ms", file=sys.stderr)
    await env.shutdown()
    agent = statistics.median(agent_times)
    bare = statistics.median(bare_times)
    return {
        "agent_step_ms": round(agent * 1000, 2),
        "bare_round_trip_ms": round(bare * 1000, 2),
        "ratio": round(agent / bare, 3),
        "steps_per_run": steps + 1,
        "rounds": rounds,
        "target_ratio": 1.25,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    summary = asyncio.run(main(args.steps, args.rounds))
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
