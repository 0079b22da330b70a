"""Agent step overhead against the hand-written loop and the bare Temporal activity round trip.

All three are measured in one process, against one dev server, interleaved
(the order rotates each round), so the machine's noise hits them alike. An
agent step with one tool call is two activities (``llm.call`` over real HTTP
to the scripted model, then ``tools.call``). The hand-written side
(``handwritten_workflow.py``) is the loop a team writes with no framework: a
workflow keeping the message list, one activity calling the official
``openai`` SDK, one activity per tool call, the same tool, the pydantic data
converter; the engine's worker has a client of its own, as ``agentsteps
worker`` builds it.
The bare baseline (``BareAgentShape``) runs the agent's activity shape with
no-op activities. The scripted model (zero delay) runs in its own process, as
a model endpoint does, so its HTTP thread never competes with the worker for
the GIL; each run gets a fresh one, started before the clock does. Each step
count is measured in turn (20 and 200 by default: the history grows with
every step, so a per-step cost that grows with it shows at 200). The dev
server runs with the transfer-task poll cap lifted (``dev_server_args``);
``--capped`` keeps the default, under which every side costs ~100 ms a step.

The last line is one JSON object: per step count, each side's median ms per
step, CPU ms per step by process (``worker`` is this process: the workers and
the client; ``server``; ``model``), Temporal billable actions per run
(``billable.py``), and ``ratio_vs_handwritten`` beside ``ratio`` (to bare), with each round's own
agent ÷ hand-written ratio (``ratio_vs_handwritten_by_round``).

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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bare_workflow import BareAgentShape, noop
from billable import billable_actions
from cpu import cpu_seconds, temporal_server_pids
from handwritten_workflow import HandwrittenActivities, HandwrittenAgentLoop
from model_process import free_port, openai_url, scripted_model_process
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.client.runs import start_agent_run
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.worker import connect, running_worker


def _script(steps: int) -> dict:
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    return {
        "rules": [
            {"match": {"role": "user"}, "reply": call},
            {"match": {"tool_result_for": "get_weather"}, "times": steps - 1, "reply": call},
        ],
        "default": {"content": "done"},
    }


SIDES = ("agent", "handwritten", "bare")


async def one_run(
    env: WorkflowEnvironment,
    side: str,
    port: int,
    task_queue: str,
    spec: AgentSpec,
    steps: int,
    pids: dict[str, list[int]],
) -> tuple[float, dict[str, float], str]:
    """One run of ``side``: seconds, CPU seconds by process kind, and its workflow id."""
    workflow_id = f"bench-{side}-{uuid.uuid4().hex[:8]}"
    with scripted_model_process(_script(steps), port) as model:  # a fresh script: its counters start at zero
        kinds = {**pids, "model": [model.pid]}
        before = {kind: sum(cpu_seconds(p) for p in ps) for kind, ps in kinds.items()}
        t0 = time.perf_counter()
        if side == "agent":
            # As a backend starts one: the console's search attributes go with the start.
            handle = await start_agent_run(env.client, spec, "weather", task_queue=task_queue, workflow_id=workflow_id)
            result = await handle.result()
            assert result.status == "completed" and len(result.steps) == steps + 1, result.status
        elif side == "handwritten":
            calls = await env.client.execute_workflow(
                HandwrittenAgentLoop.run,
                args=["weather", steps + 1],
                id=workflow_id,
                task_queue=task_queue + "-hand",
            )
            assert calls == steps + 1, calls
        else:
            await env.client.execute_workflow(
                BareAgentShape.run, steps, id=workflow_id, task_queue=task_queue + "-bare"
            )
        seconds = time.perf_counter() - t0
        cpu = {kind: sum(cpu_seconds(p) for p in ps) - before[kind] for kind, ps in kinds.items()}
    return seconds, cpu, workflow_id


async def measure(env: WorkflowEnvironment, port: int, task_queue: str, steps: int, rounds: int) -> dict:
    """Agent, hand-written and bare runs of ``steps`` steps, interleaved (the order rotates each round);
    medians over ``rounds`` after a warm-up round."""
    spec = AgentSpec(
        name="bench",
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=128_000),
        tools=["get_weather"],
        max_steps=steps + 1,
        token_budget=10**9,  # the history grows each step; the budget is not what is measured
    )
    pids = {"worker": [os.getpid()], "server": temporal_server_pids()}
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    cpu: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    last_ids: dict[str, str] = {}
    for round_ in range(rounds + 1):  # round 0 warms every path up
        order = SIDES[round_ % 3 :] + SIDES[: round_ % 3]
        line = []
        for side in order:
            seconds, used, last_ids[side] = await one_run(env, side, port, task_queue, spec, steps, pids)
            if round_:
                times[side].append(seconds / (steps + 1))
                cpu[side].append(used)
            line.append(f"{side} {1000 * seconds / (steps + 1):.1f}")
        print(f"{steps} steps, round {round_}: ms/step " + ", ".join(line), file=sys.stderr, flush=True)
    figure: dict = {"steps_per_run": steps + 1}
    for side in SIDES:
        figure[f"{side}_step_ms"] = round(statistics.median(times[side]) * 1000, 2)
        figure[f"{side}_cpu_ms_per_step"] = {
            kind: round(1000 * sum(c[kind] for c in cpu[side]) / (len(cpu[side]) * (steps + 1)), 2)
            for kind in cpu[side][0]
        }
        figure[f"{side}_billable_actions_per_run"] = await billable_actions(env.client, last_ids[side])
    agent, hand, bare = (statistics.median(times[s]) for s in SIDES)
    figure["ratio"] = round(agent / bare, 3)  # to bare, as before
    figure["ratio_vs_handwritten"] = round(agent / hand, 3)
    # Each round runs both sides back to back, so a round's ratio shares that moment's load: their spread
    # says how far a median can move at this load.
    figure["ratio_vs_handwritten_by_round"] = [round(a / h, 3) for a, h in zip(times["agent"], times["handwritten"])]
    figure["handwritten_ratio_to_bare"] = round(hand / bare, 3)
    cpu_total = {s: sum(figure[f"{s}_cpu_ms_per_step"][k] for k in ("worker", "server")) for s in SIDES}
    figure["cpu_ratio_vs_handwritten"] = round(cpu_total["agent"] / cpu_total["handwritten"], 3)
    return figure


@asynccontextmanager
async def serving(env: WorkflowEnvironment, port: int) -> AsyncIterator[str]:
    """The engine's worker, the bare and the hand-written loop's in this process, on the model at ``port``;
    yields the engine's task queue (``one_run`` adds the others' suffixes).

    The engine's worker has a client of its own, as ``agentsteps worker`` builds it (its data converter,
    its connection settings); the others use ``env``'s, with the converter a team would pick."""
    with tempfile.TemporaryDirectory() as state:
        settings = WorkerSettings(
            state_dir=Path(state),
            task_queue=f"bench-{uuid.uuid4().hex[:6]}",
            providers=ProviderSettings(openai_base_url=openai_url(port)),
        )
        bare_worker = Worker(
            env.client, task_queue=settings.task_queue + "-bare", workflows=[BareAgentShape], activities=[noop]
        )
        hand = HandwrittenActivities(openai_url(port))
        hand_worker = Worker(
            env.client,
            task_queue=settings.task_queue + "-hand",
            workflows=[HandwrittenAgentLoop],
            activities=[hand.chat, hand.get_weather],
        )
        engine = await connect(settings, env.client.service_client.config.target_host)
        async with running_worker(engine, settings), bare_worker, hand_worker:
            yield settings.task_queue


async def main(step_counts: list[int], rounds: int, capped: bool) -> dict:
    extra = [] if capped else dev_server_args()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        data_converter=pydantic_data_converter,
        dev_server_extra_args=extra,
        dev_server_log_level="error",
    )
    by_steps: dict[str, dict] = {}
    port = free_port()
    async with serving(env, port) as task_queue:
        for steps in step_counts:
            by_steps[str(steps)] = f = await measure(env, port, task_queue, steps, rounds)
            print(
                f"{steps} steps: agent {f['agent_step_ms']} ms/step against the hand-written loop "
                f"{f['handwritten_step_ms']} (ratio {f['ratio_vs_handwritten']}) and the bare baseline "
                f"{f['bare_step_ms']} (ratio {f['ratio']}); CPU ms/step agent {f['agent_cpu_ms_per_step']}, "
                f"hand-written {f['handwritten_cpu_ms_per_step']}; billable actions/run agent "
                f"{f['agent_billable_actions_per_run']['total']}, hand-written "
                f"{f['handwritten_billable_actions_per_run']['total']}",
                file=sys.stderr,
                flush=True,
            )
    await env.shutdown()
    return {
        "by_steps": by_steps,
        "server": "dev server, default transfer-task poll cap" if capped else "dev server, poll cap lifted",
        "dev_server_args": extra,
        "rounds": rounds,
        "load_average": os.getloadavg(),
        "targets": {"ratio_vs_handwritten": {"20": 1.0, "200": 0.45}, "cpu_ratio_vs_handwritten": 1.0},
        "ratio_vs_handwritten": {k: f["ratio_vs_handwritten"] for k, f in by_steps.items()},
        "cpu_ratio_vs_handwritten": {k: f["cpu_ratio_vs_handwritten"] for k, f in by_steps.items()},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", default="20,200", help="comma-separated step counts, each measured in turn")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--capped",
        action="store_true",
        help="keep the dev server's default transfer-task poll cap (to see what it costs)",
    )
    args = parser.parse_args()
    summary = asyncio.run(main([int(n) for n in args.steps.split(",")], args.rounds, args.capped))
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
