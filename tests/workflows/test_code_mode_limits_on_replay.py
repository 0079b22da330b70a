"""Issue 39, conditions 1 and 3, through the whole workflow, on a worker that keeps no program live.

Real dev server, real Monty, real HTTP to the scripted model. The worker's live cache holds nothing, so
every resume after a call rebuilds its program by replay (as a worker that restarted between two calls
does): the segment after a replay must keep its limits, and a hostile one must cost only its own run.
Each finished history then replays in a fresh ``Replayer`` with the worker's own runner.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest_asyncio
from code_mode_support import code_worker, connect_with_store, worker_settings
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Replayer

from agentsteps.activities.sandbox import SandboxPool
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.code.program import ProgramLimits
from agentsteps.contracts.names import AGENT_WORKFLOW, TOOLS_CALL
from agentsteps.contracts.spec import DefaultResult
from agentsteps.contracts.violations import ViolationKind
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.worker import ENGINE_SANDBOX, build_data_converter
from agentsteps.workflows.agent import AgentWorkflow

MODEL = "scripted-2026-01-01"
FALLBACK = {"hostile": True}
LISTED = 'r = await tickets_list("open", count=6)\n'
PROGRAMS = {
    # task name -> (program, the kind its run ends with: None for a value)
    "loop": (LISTED + "while True:\n    pass\n", "timeout"),
    "memory": (LISTED + 'x = []\nwhile True:\n    x.append("a" * 16000000)\n', "memory"),
    "recursion": (LISTED + "def f(n):\n    return f(n + 1)\nf(0)\n", "recursion"),
    "fine": (
        LISTED
        + 'n = await tickets_nudge(r["tickets"][2]["id"])\nsorted([t["id"] for t in r["tickets"] if t["stalled"]])\n',
        None,
    ),
}


@pytest_asyncio.fixture(scope="module")
async def shared(temporal_env, tmp_path_factory):
    rules = [
        {"match": {"contains": f"task {name}"}, "reply": {"content": f"```python\n{program}```\n"}}
        for name, (program, _) in PROGRAMS.items()
    ]
    with ScriptedModelServer({"rules": rules}) as server:
        state = tmp_path_factory.mktemp("limits-on-replay") / "state"
        settings = worker_settings(state, f"limits-replay-{uuid.uuid4().hex[:8]}", server.url_openai)
        client = await connect_with_store(temporal_env.client.service_client.config.target_host, settings)
        pool = SandboxPool(max_processes=2, live_programs=0)  # nothing stays live: every resume replays
        async with code_worker(client, settings, pool) as (_, sandbox):
            yield client, settings, sandbox


def spec() -> AgentSpec:
    return AgentSpec(
        name="limits-on-replay",
        model=LLMConfig(model=MODEL, max_tokens=512, context_window=64_000),
        tools=["tickets.list", "tickets.nudge"],
        mode="code",
        max_steps=2,
        reprompt_budget=0,
        default_result=DefaultResult(value=FALLBACK),
        # 32 MiB: the bomb's 16 MB steps trip it on the second, well inside 1 s with four programs at once.
        code_limits=ProgramLimits(segment_seconds=1.0, memory_bytes=32 * 1024 * 1024),
    )


async def run(shared, name: str) -> tuple[str, AgentResult]:
    client, settings, _ = shared
    workflow_id = f"limits-replay-{name}-{uuid.uuid4().hex[:8]}"
    result = await client.execute_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec(), input=f"task {name}"),
        id=workflow_id,
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    return workflow_id, result


async def test_hostile_segments_after_a_replay_end_typed_and_cost_no_other_run(shared):
    """A tight loop, a memory bomb and a deep recursion, each in the segment after a replayed pause, run at
    once beside a well-behaved program on one worker: each hostile run ends with its typed violation
    (the loop at its 1 s limit, not the pool's 120 s backstop), the well-behaved one completes, every call
    ran once, and no interpreter is left held."""
    client, settings, sandbox = shared
    misses, started = sandbox.pool.live.misses, asyncio.get_running_loop().time()
    ran = dict(zip(PROGRAMS, await asyncio.gather(*(run(shared, name) for name in PROGRAMS))))
    assert asyncio.get_running_loop().time() - started < 60
    for name, (_, kind) in PROGRAMS.items():
        workflow_id, result = ran[name]
        if kind is None:
            assert result.status == "completed" and result.output == [3, 6], result
        else:
            assert result.status == "completed_with_default", result
            [violation] = result.violations
            assert violation.kind == ViolationKind.program_failed and f"[{kind}]" in violation.message
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        calls = [
            e
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == TOOLS_CALL
        ]
        assert len(calls) == (2 if kind is None else 1), name
    assert sandbox.pool.live.misses - misses >= len(PROGRAMS), "a resume found its program live: no replay ran"
    assert sandbox.pool.checked_out == 0 and len(sandbox.pool.live) == 0


async def test_a_run_whose_time_limit_fired_replays_to_the_same_end_in_a_fresh_worker(shared):
    """The run whose segment passed its time limit after a replayed pause, and the one that passed, replay in
    a fresh worker (a new ``Replayer`` with the worker's runner) to the same commands and the same end."""
    client, settings, _ = shared
    for name in ("loop", "fine"):
        workflow_id, result = await run(shared, name)
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        replayer = Replayer(
            workflows=[AgentWorkflow], data_converter=build_data_converter(settings), workflow_runner=ENGINE_SANDBOX
        )
        replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None, (name, replayed.replay_failure)
