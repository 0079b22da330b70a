"""A paused program rebuilt by replay is the same program: same source and same outcomes give the same calls
with the same arguments, on a replay from the start, after a dump and load, and in a second process (issue 39).

Real Monty (the pool's interpreter processes). Generated programs mix what could differ between two runs of an
interpreter: dict and set order, big integers, string methods, comprehensions, exceptions, ``asyncio.gather``,
a call started early and awaited later, the seeded ``random``. A Monty upgrade that changes any of it fails
here before it reaches a worker. Hostile programs end the same way, at the same call, on replay.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from program_trace import BLOCKS, FIXED_PROGRAMS, LIMITS, close_rebuilt, program_source, trace

from agentsteps.activities.sandbox import SandboxPool

SUPPORT = Path(__file__).parents[1] / "support" / "program_trace.py"

programs = st.lists(st.tuples(st.integers(0, len(BLOCKS) - 1), st.integers(0, 9)), min_size=1, max_size=5).map(
    program_source
)


@pytest_asyncio.fixture(scope="module")
async def pool():
    p = SandboxPool(max_processes=3, live_programs=0)
    yield p
    await close_rebuilt()
    await p.close()


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=programs, data=st.data())
async def test_a_replayed_or_reloaded_program_makes_the_same_calls_with_the_same_arguments(pool, program, data):
    first = await trace(pool, program)
    assert first["calls"], program  # every block calls out, so every program pauses
    again = await trace(pool, program)
    assert again == first, "the same source and outcomes gave other calls"
    at = data.draw(st.integers(0, max(first["pauses"] - 1, 0)))
    replayed = await trace(pool, program, replay_at=at)
    assert replayed == first, f"replayed from the start to pause {at}, the program diverged"
    reloaded = await trace(pool, program, dump_at=at)
    assert reloaded == first, f"dumped and loaded at pause {at}, the program diverged"
    await close_rebuilt()


async def test_a_second_process_makes_the_same_calls_for_the_same_programs(pool):
    here = [await trace(pool, program_source(blocks)) for blocks in FIXED_PROGRAMS]
    out = subprocess.run([sys.executable, str(SUPPORT)], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    there = json.loads(out.stdout.strip().splitlines()[-1])
    for blocks, mine, theirs in zip(FIXED_PROGRAMS, json.loads(json.dumps(here)), there, strict=True):
        assert mine == theirs, program_source(blocks)
    assert all(t["state"] == "completed" for t in here)


HOSTILE = {
    "memory": "r = await f(1)\nx = 'a' * 1000\nwhile True:\n    x = x + x\n",
    "recursion": "r = await f(1)\ndef down(n):\n    return down(n + 1)\ndown(0)\n",
    "tool_call_limit": "for i in range(100):\n    await f(i)\n",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
async def test_a_counted_limit_fires_at_the_same_call_on_replay(pool, kind):
    program = HOSTILE[kind]
    first = await trace(pool, program)
    assert first["state"] == "failed" and first["error"] == kind
    for at in (0, first["pauses"] - 1):
        assert await trace(pool, program, replay_at=at) == first
    await close_rebuilt()
    # The limit fired where it did the first time: after the first call, or before the call over the limit.
    assert first["calls"][-1]["call_id"] == (LIMITS.max_tool_calls - 1 if kind == "tool_call_limit" else 0)
