"""Issue 39, condition 1: a program's limits decide the same way on a replay as they did the first time.

Real Monty, the real sandbox activities. A program rebuilt by replay (its live copy lost: another worker, a
restart) re-runs only segments that paused the first time, so no wall-clock limit may fail them, however
loaded the machine; the "load" here is the interpreter's process stopped (SIGSTOP) for longer than the
segment limit and its grace, in the middle of a replayed segment. The segment after the replayed ones is
live again: it keeps its time limit, and a hostile one (tight loop, memory bomb, deep recursion) ends typed
there as it would have the first time, without holding the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import pytest_asyncio

from agentsteps.activities.sandbox import SandboxActivities, SandboxPool, SnapshotVault
from agentsteps.contracts import ToolSchema
from agentsteps.contracts.code.program import (
    CallOutcome,
    ProgramLimits,
    ProgramStatus,
    ReplayLog,
    ResumeProgramInput,
    StartProgramInput,
)
from agentsteps.contracts.code.stubs import program_functions
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

TOOLS = [
    ToolSchema(name="tickets.list", parameters={"type": "object", "properties": {"status": {"type": "string"}}}),
    ToolSchema(name="tickets.close", parameters={"type": "object", "properties": {"id": {"type": "integer"}}}),
]
FUNCTIONS = program_functions(TOOLS)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
LIMIT = 2.0
"""The segment limit of the program that must pass: its busy segment (a million additions) takes 0.1-0.6 s
at load 2-35."""
FROZEN = LIMIT + 1.5
"""Longer than the limit plus Monty's own grace (1 s) before it kills a worker over its turn limit."""
BUSY = (
    'ts = await tickets_list("open")\nn = 0\nfor i in range(1000000):\n    n += i\n'
    "c = await tickets_close(ts[0])\n[n, c]\n"
)


@pytest_asyncio.fixture
async def pool():
    p = SandboxPool(max_processes=2)
    yield p
    await p.close()


@pytest.fixture
def acts(pool: SandboxPool, tmp_path: Path) -> SandboxActivities:
    return SandboxActivities(pool, SnapshotVault(PayloadStore(LocalDirStorageDriver(tmp_path / "payloads")), b"k" * 32))


def _start(program: str, limits: ProgramLimits) -> StartProgramInput:
    return StartProgramInput(
        run_key="run-1",
        program=program,
        functions=FUNCTIONS,
        limits=limits,
        now=NOW.isoformat(),
        seed=7,
        keep_live=True,
    )


def _answer(status: ProgramStatus) -> list[CallOutcome]:
    return [CallOutcome(call_id=c.call_id, value=[4] if c.function == "tickets_list" else 40) for c in status.calls]


def _resume(status: ProgramStatus, outcomes: list[CallOutcome], limits: ProgramLimits, **fields) -> ResumeProgramInput:
    given = {
        "run_key": "run-1",
        "functions": FUNCTIONS,
        "outcomes": outcomes,
        "limits": limits,
        "output": status.output,
        "calls_made": status.calls_made,
        "sandbox_seconds": status.sandbox_seconds,
        "live": status.live,
        "replay_calls": status.replay_calls,
    }
    return ResumeProgramInput(**{**given, **fields})


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def loaded_replays(pool: SandboxPool):
    """Every session opened meanwhile is stopped for ``FROZEN`` seconds once it is computing: a machine so
    loaded that a replayed segment takes longer than its limit. Yields the list of (pid, stopped) seen."""
    seen: list[tuple[int, bool]] = []
    opened = pool.open
    freezers: list[asyncio.Task[None]] = []

    async def freeze(pid: int) -> None:
        before = _cpu_seconds(pid)
        while _cpu_seconds(pid) - before < 0.02:  # it is running the program's loop now, not loading
            await asyncio.sleep(0.005)
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(FROZEN)
        finally:
            os.kill(pid, signal.SIGCONT)
        seen[-1] = (pid, True)

    async def open_stopped(**checkout):
        held = await opened(**checkout)
        seen.append((held.session.worker_pid, False))
        freezers.append(asyncio.ensure_future(freeze(held.session.worker_pid)))
        return held

    pool.open = open_stopped  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        pool.open = opened  # type: ignore[method-assign]
        for task in freezers:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


@pytest.mark.parametrize("base", ["start", "snapshot"])
async def test_a_program_that_passed_passes_its_replay_on_a_machine_too_loaded_for_its_time_limit(acts, pool, base):
    """The busy segment passed its 2 s limit the first time; rebuilt by replay (from the program's start, or
    from a snapshot stored at the pause before it) while its interpreter is stopped for 3.5 s in that very
    segment, it still reaches its pause, and the program ends with the value it would have had."""
    limits = ProgramLimits(segment_seconds=LIMIT)
    acts.replay_calls_bound = 0  # a snapshot at every pause: the "snapshot" case replays from the first one
    status = await acts.start(_start(BUSY, limits))
    assert status.state == "pending" and status.replay is not None, status.error
    first = _answer(status)
    log = status.replay.model_copy(update={"base": status.snapshot if base == "snapshot" else None})
    status = await acts.resume(_resume(status, first, limits))
    assert status.state == "pending" and status.awaiting == [1], status.error
    acts.replay_calls_bound = 200
    await pool.live.close()  # the worker restarted: the paused program is gone
    log = log.model_copy(update={"batches": [first]})  # either way the busy segment is re-run
    async with loaded_replays(pool) as seen:
        done = await acts.resume(_resume(status, _answer(status), limits, live=None, replay=log))
    assert seen and seen[0][1], "the replay's interpreter was never stopped mid-segment"
    assert done.state == "completed", done.error
    assert done.value == [sum(range(1000000)), 40]


@pytest.mark.parametrize(
    ("hostile", "kind"),
    [
        ("while True:\n    pass\n", "timeout"),
        ('x = []\nwhile True:\n    x.append("a" * 1000000)\n', "memory"),
        ("def f(n):\n    return f(n + 1)\nf(0)\n", "recursion"),
    ],
    ids=["tight-loop", "memory-bomb", "deep-recursion"],
)
async def test_the_segment_after_a_replay_is_live_and_a_hostile_one_ends_typed_within_its_limit(
    acts, pool, hostile, kind
):
    """After a replay the program runs live again, under every limit: a tight loop is stopped at its 1 s
    limit (not by the pool's 120 s backstop), a memory bomb and a deep recursion by Monty's counted limits,
    and the worker's interpreters are free for the next program."""
    limits = ProgramLimits(segment_seconds=1.0, memory_bytes=32 * 1024 * 1024)
    status = await acts.start(_start('ts = await tickets_list("open")\n' + hostile, limits))
    assert status.state == "pending" and status.replay is not None
    await pool.live.close()
    started = time.perf_counter()
    ended = await acts.resume(_resume(status, _answer(status), limits, live=None, replay=status.replay))
    elapsed = time.perf_counter() - started
    assert ended.state == "failed" and ended.error.kind == kind, ended.error
    assert elapsed < 20, f"the hostile segment held the worker {elapsed:.1f}s"
    assert pool.checked_out == 0 and len(pool.live) == 0
    again = await acts.start(_start('ts = await tickets_list("open")\nlen(ts)\n', limits))
    assert again.state == "pending"


async def test_a_segment_whose_time_limit_fired_fails_the_same_way_live_and_after_a_replay(acts, pool):
    """The same program, its live copy kept or lost at its pause: the segment after it fails with the same
    kind, at the same point (the same calls made), either way."""
    limits = ProgramLimits(segment_seconds=0.5)
    program = 'ts = await tickets_list("open")\nwhile True:\n    pass\n'
    ends = []
    for lose in (False, True):
        status = await acts.start(_start(program, limits))
        replay = status.replay
        if lose:
            await pool.live.close()
        fields = {"live": None, "replay": replay} if lose else {}
        ended = await acts.resume(_resume(status, _answer(status), limits, **fields))
        ends.append((ended.state, ended.error.kind if ended.error else None, ended.calls_made, json.dumps(ended.value)))
    assert ends[0] == ends[1] == ("failed", "timeout", 1, "null")
