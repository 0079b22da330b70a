"""Hostile programs through the whole workflow: each ends the run with a typed
violation in its result, and the same worker then runs a normal program.

Real dev server, real Monty, real HTTP to the scripted model. One worker and
one model server serve the whole module, so "the worker stays alive" is
checked against the very worker that ran every hostile program before it.
"""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio
from code_mode_support import NudgeLedger, code_worker, connect_with_store, worker_settings

from agentsteps.activities.sandbox import SandboxPool
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.code.program import ProgramLimits
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.spec import DefaultResult
from agentsteps.contracts.violations import ViolationKind
from agentsteps.scripted_model import ScriptedModelServer

MODEL = "scripted-2026-01-01"
FALLBACK = {"hostile": True}


@pytest.fixture(scope="module")
def model_server():
    with ScriptedModelServer({"rules": []}) as server:
        yield server


@pytest_asyncio.fixture(scope="module")
async def shared(temporal_env, model_server, tmp_path_factory):
    state = tmp_path_factory.mktemp("hostile") / "state"
    settings = worker_settings(state, f"hostile-{uuid.uuid4().hex[:8]}", model_server.url_openai)
    client = await connect_with_store(temporal_env.client.service_client.config.target_host, settings)
    pool = SandboxPool(max_processes=2)
    async with code_worker(client, settings, pool) as (worker, sandbox):
        yield client, settings, sandbox


def spec() -> AgentSpec:
    # No re-prompt and a declared default: the run returns at once, carrying
    # the program's typed violation in its result.
    return AgentSpec(
        name="hostile",
        model=LLMConfig(model=MODEL, max_tokens=512, context_window=64_000),
        tools=["tickets.list", "tickets.nudge", "wait"],
        mode="code",
        max_steps=2,
        reprompt_budget=0,
        default_result=DefaultResult(value=FALLBACK),
        code_limits=ProgramLimits(segment_seconds=2.0),
    )


async def run_program(shared, server: ScriptedModelServer, program: str) -> AgentResult:
    client, settings, _ = shared
    server.set_script({"replies": [{"content": f"```python\n{program}```\n"}]})
    return await client.execute_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec(), input="do the task"),
        id=f"hostile-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )


async def assert_worker_still_serves(shared, server: ScriptedModelServer) -> None:
    program = 'r = await tickets_list("open", count=6)\nsorted([t["id"] for t in r["tickets"] if t["stalled"]])\n'
    result = await run_program(shared, server, program)
    assert result.status == "completed" and result.output == [3, 6]
    assert shared[2].pool.checked_out == 0


HOSTILE = [
    # (id, program, violation kind, text the violation's message must hold)
    ("infinite-loop", "while True:\n    pass\n", ViolationKind.program_failed, "[timeout]"),
    # 16 MB a step: the 256 MB limit trips in ~16 allocations, well inside the 2 s limit on a loaded machine
    # (1 MB steps took 2.5 s there and met the time limit first).
    (
        "memory-bomb-growing",
        'x = []\nwhile True:\n    x.append("a" * 16000000)\n',
        ViolationKind.program_failed,
        "[memory]",
    ),
    ("memory-bomb-one-allocation", "x = 'a' * 10**10\nlen(x)\n", ViolationKind.program_failed, "[memory]"),
    ("deep-recursion", "def f(n):\n    return f(n + 1)\nf(0)\n", ViolationKind.program_failed, "[recursion]"),
    ("import-os-getenv", "import os\nos.getenv('HOME')\n", ViolationKind.program_failed, "PermissionError"),
    ("import-os-environ", "import os\nos.environ['PATH']\n", ViolationKind.program_failed, "PermissionError"),
    ("import-subprocess", "import subprocess\nsubprocess.run(['id'])\n", ViolationKind.program_type, "subprocess"),
    ("import-socket", "import socket\nsocket.socket()\n", ViolationKind.program_type, "socket"),
    ("open-file", "open('/etc/passwd').read()\n", ViolationKind.program_type, "open"),
    (
        "pathlib-read",
        "from pathlib import Path\nPath('/etc/passwd').read_text()\n",
        ViolationKind.program_failed,
        "PermissionError",
    ),
    (
        "pathlib-write",
        "from pathlib import Path\nPath('/tmp/pwned').write_text('x')\n",
        ViolationKind.program_failed,
        "PermissionError",
    ),
    (
        "tool-call-flood",
        "import asyncio\nawait asyncio.gather(*[wait(0) for _ in range(100000)])\n",
        ViolationKind.program_failed,
        "[tool_call_limit]",
    ),
    ("syntax-error", "x = = 1\n", ViolationKind.program_syntax, "invalid-syntax"),
    ("unclosed-bracket", "r = await tickets_list('open'\n", ViolationKind.program_syntax, "invalid-syntax"),
    ("set-value", "{1, 2}\n", ViolationKind.program_failed, "[not_serializable]"),
    ("bytes-value", "b'secret'\n", ViolationKind.program_failed, "[not_serializable]"),
    ("object-value", "class A:\n    pass\nA()\n", ViolationKind.program_failed, "[not_serializable]"),
    ("nan-value", "float('nan')\n", ViolationKind.program_failed, "[not_serializable]"),
    (
        "deeply-nested-value",
        "x = []\nfor i in range(100000):\n    x = [x]\nx\n",
        ViolationKind.program_failed,
        "[not_serializable]",
    ),
]


@pytest.mark.parametrize(("program", "kind", "text"), [pytest.param(*c[1:], id=c[0]) for c in HOSTILE])
async def test_hostile_program_ends_with_a_typed_violation_and_the_worker_stays_alive(
    shared, model_server, program, kind, text
):
    result = await run_program(shared, model_server, program)

    assert result.status == "completed_with_default" and result.output == FALLBACK
    [violation] = result.violations
    assert violation.kind == kind and violation.contract == "code.program"
    assert text in violation.message, violation.message
    assert len(violation.message) < 4000
    await assert_worker_still_serves(shared, model_server)


async def test_huge_output_reaches_the_model_capped_with_a_notice(shared, model_server):
    # Printing is not an error: the run completes, and what reaches the model is capped.
    program = "for i in range(100000):\n    print('x' * 100)\n'done'\n"
    result = await run_program(shared, model_server, program)

    assert result.status == "completed" and result.output == "done"
    shown = result.steps[-1].content or ""
    assert "[output truncated:" in shown and len(shown) < 4096 + 200
    await assert_worker_still_serves(shared, model_server)


async def test_huge_value_is_the_output_but_the_model_sees_four_kib(shared, model_server):
    result = await run_program(shared, model_server, "'x' * 3000000\n")

    assert result.status == "completed" and result.output == "x" * 3_000_000
    shown = result.steps[-1].content or ""
    assert "[output truncated:" in shown and len(shown) < 4096 + 200
    await assert_worker_still_serves(shared, model_server)


async def test_hostile_program_runs_no_side_effect_before_it_is_stopped(shared, model_server):
    _, settings, _ = shared
    ledger = NudgeLedger(settings.state_dir / "nudges.db")
    before = ledger.attempts()
    program = "import asyncio\nawait asyncio.gather(*[tickets_nudge(i) for i in range(5000)])\n"
    result = await run_program(shared, model_server, program)

    assert result.status == "completed_with_default"
    assert "[tool_call_limit]" in result.violations[0].message
    # The limit is enforced while the calls are collected, before any runs.
    assert ledger.attempts() == before
