"""SIGKILL the worker mid-program: the run completes on a new worker, and every
side-effecting tool call ran exactly once, counted on the tool's side."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from code_mode_support import NudgeLedger
from process_support import STICKY_AFTER_KILL, kill, start_worker_process, wait_for

from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.code.program import ProgramLimits
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy

WORKER = Path(__file__).parents[1] / "support" / "code_mode_support.py"
SPIN = "n = 0\nfor i in range(30_000_000):\n    n += 1\n"

PROGRAMS = {
    # Killed while the interpreter runs a segment (code.start is computing).
    "interpreter_segment": SPIN + "a = await tickets_nudge(1)\nb = await tickets_nudge(2)\n[a['id'], b['id']]\n",
    # Killed right after the first side effect, before the second call starts.
    "between_tool_calls": "a = await tickets_nudge(1)\n" + SPIN + "b = await tickets_nudge(2)\n[a['id'], b['id']]\n",
    # Killed while a side-effecting tool is still running.
    "during_tool_call": "a = await tickets_nudge(1, delay_seconds=3)\nb = await tickets_nudge(2)\n[a['id'], b['id']]\n",
}


@pytest.mark.parametrize("point", list(PROGRAMS))
async def test_sigkilled_worker_mid_program_completes_and_each_side_effect_runs_once(
    temporal_env, client, scripted, tmp_path, point
):
    scripted.set_script({"replies": [{"content": f"```python\n{PROGRAMS[point]}```"}]})
    address = temporal_env.client.service_client.config.target_host
    task_queue = f"code-kill-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    ledger = NudgeLedger(state_dir / "nudges.db")
    first = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir, env=STICKY_AFTER_KILL)
    spec = AgentSpec(
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=256, context_window=64_000),
        tools=["tickets.nudge"],
        mode="code",
        max_steps=2,
        tool_policy=ActivityPolicy(start_to_close_seconds=5, initial_interval_seconds=0.5),
        # The spin is the kill point, not a limit under test: on a loaded machine (or beside
        # parallel test processes) it must not run into the 5 s default segment limit.
        code_limits=ProgramLimits(segment_seconds=60.0),
    )
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="nudge"),
        id=f"kill-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=AgentResult,
        # A program segment runs as a local activity inside a workflow task: the killed worker's segment is
        # rerun elsewhere once that task times out (Temporal's default 10 s). 5 s moves it the same way,
        # sooner; a segment that outlasts it on a live worker keeps its task alive (the SDK heartbeats it at 4 s).
        task_timeout=timedelta(seconds=5),
    )
    second = None
    try:
        if point == "interpreter_segment":
            await wait_for(lambda: len(scripted.requests) == 1)
            await asyncio.sleep(0.6)  # past the check, inside the spinning segment
            assert ledger.nudged() == []
        else:
            await wait_for(lambda: ledger.nudged() == [1])
        kill(first)
        second = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir)
        result = await asyncio.wait_for(handle.result(), timeout=90)
    finally:
        for proc in (first, second):
            if proc is not None:
                kill(proc)
    assert result.status == "completed"
    assert result.output == [1, 2]
    assert ledger.nudged() == [1, 2], "each nudge's side effect happened exactly once"
