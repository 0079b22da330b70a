"""Run a program against recorded outcomes and trace every call it makes: the determinism the replay of a
paused program relies on (issue 39). Used by ``tests/activities/test_program_replay_determinism.py``, and run
as a script (``python program_trace.py``) for the check in a second process: it prints the traces of
``FIXED_PROGRAMS`` as JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script from anywhere: the repository root is the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from agentsteps.activities.sandbox.driver import OutputSink, SegmentDriver, checkout_options
from agentsteps.activities.sandbox.pool import SandboxPool
from agentsteps.contracts.code.program import CallOutcome, ProgramFunction, ProgramLimits

FUNCTIONS = [
    ProgramFunction(python_name="f", tool="f", params=["x"], required=["x"]),
    ProgramFunction(python_name="g", tool="g", params=["a", "b"], required=["a", "b"]),
]
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SEED = 20261206

BLOCKS = (
    # dict order, set order (iterated as is, not sorted), comprehensions
    "d = {{str(i * 7 % 13): i for i in range({n})}}\nacc.append(await f(list(d.keys())))\n",
    "s = {{(i * 31) % 17 for i in range({n} + 3)}}\nacc.append(await f([v for v in s]))\n",
    # big integers
    "b = 2 ** ({n} * 13 + 70) + 3 ** ({n} + 40)\nacc.append(await g(str(b), b % 1000003))\n",
    # string methods
    "t = ' '.join(['w' + str(i) for i in range({n})]).upper().replace('W', 'v').split()\n"
    "acc.append(await f('-'.join(reversed(t)).title()))\n",
    # exceptions: a tool error caught, a program error caught
    "try:\n    acc.append(await f('boom{n}'))\nexcept RuntimeError as e:\n    acc.append('caught ' + str(e))\n",
    "try:\n    acc.append([1, 2][{n} + 5])\nexcept IndexError:\n    acc.append(await g('index', {n}))\n",
    # gathered calls, and one started early and awaited later
    "rs = await asyncio.gather(*[f(i * {n}) for i in range(3)])\nacc.append(rs)\n",
    "early = g('early', {n})\nacc.append(await f({n}))\nacc.append(await early)\n",
    # the result steers what comes next
    "r = await f({n})\nif r['n'] % 2:\n    acc.append(await g('odd', r['n']))\n"
    "else:\n    acc.append(sorted(r.items()))\n",
    # the seeded random module and the frozen clock
    "import random\nacc.append(await f(random.randint(0, 10 ** 12)))\n",
)

FIXED_PROGRAMS = [
    [(0, 3), (2, 5), (6, 2)],
    [(1, 4), (4, 1), (7, 2), (9, 0)],
    [(3, 6), (5, 2), (8, 3)],
    [(8, 1), (1, 9), (0, 2), (6, 4)],
]


def program_source(blocks: list[tuple[int, int]]) -> str:
    return "import asyncio\nacc = []\n" + "".join(BLOCKS[b].format(n=n) for b, n in blocks) + "acc\n"


def outcome(call: dict[str, Any]) -> CallOutcome:
    """What the world answers to a call: a function of the call alone, so two runs that make the same calls get
    the same answers, and a run that makes other calls gets other answers."""
    digest = hashlib.sha256(f"{call['function']}:{call['arguments']}".encode()).hexdigest()
    if "boom" in call["arguments"]:
        return CallOutcome(call_id=call["call_id"], error=f"tool said no ({digest[:6]})")
    return CallOutcome(call_id=call["call_id"], value={"echo": digest[:8], "n": int(digest[:4], 16)})


LIMITS = ProgramLimits(segment_seconds=10, memory_bytes=32 * 1024 * 1024, recursion_depth=60, max_tool_calls=40)


async def trace(
    pool: SandboxPool,
    program: str,
    *,
    replay_at: int | None = None,
    dump_at: int | None = None,
    limits: ProgramLimits = LIMITS,
) -> dict[str, Any]:
    """The calls a program makes (in order, with their arguments) and how it ends, each pause answered by
    ``outcome``. ``replay_at``: rebuild the program at pause k in a fresh interpreter by replay from its start
    (the first k pauses answered from the record) and go on from there; ``dump_at``: dump the interpreter at
    pause k and load it into a fresh one."""
    calls: list[dict[str, Any]] = []
    batches: list[list[CallOutcome]] = []
    options = checkout_options(limits, NOW, SEED, whole_program=True)
    sink = OutputSink(4096)
    try:
        return await _traced(pool, program, options, sink, calls, batches, replay_at, dump_at, limits)
    finally:
        await close_rebuilt()


async def _traced(
    pool: SandboxPool,
    program: str,
    options: dict[str, Any],
    sink: OutputSink,
    calls: list[dict[str, Any]],
    batches: list[list[CallOutcome]],
    replay_at: int | None,
    dump_at: int | None,
    limits: ProgramLimits,
) -> dict[str, Any]:
    async with pool.session(**options) as session:
        status, paused = await SegmentDriver(FUNCTIONS, limits, sink, 0, 0.0).start(session, program)
        pause = 0
        while True:
            calls += [c.model_dump() for c in status.calls]
            if status.state != "pending":
                break
            by_id = {c["call_id"]: c for c in calls}
            outcomes = [outcome(by_id[i]) for i in status.awaiting]
            made = status.calls_made
            if pause == replay_at:
                paused = await _replayed(pool, program, batches, limits)
            elif pause == dump_at:
                paused = await _loaded(pool, paused.dump(), limits)
            batches.append(outcomes)
            driver = SegmentDriver(FUNCTIONS, limits, sink, made, 0.0)
            status, paused = await driver.resume_live(paused, outcomes)
            pause += 1
    error = status.error.kind if status.error else None
    return {"calls": calls, "state": status.state, "value": status.value, "error": error, "pauses": pause}


_held: list[Any] = []
"""Sessions opened for a rebuilt program, closed by ``close_rebuilt``."""


async def _replayed(pool: SandboxPool, program: str, batches: list[list[CallOutcome]], limits: ProgramLimits) -> Any:
    held = await pool.open(**checkout_options(limits, NOW, SEED, whole_program=True, replay=True))
    _held.append(held)
    driver = SegmentDriver(FUNCTIONS, limits, OutputSink(4096), 0, 0.0)
    return await driver.replay(held.session, program, None, batches)


async def _loaded(pool: SandboxPool, blob: bytes, limits: ProgramLimits) -> Any:
    held = await pool.open()
    _held.append(held)
    driver = SegmentDriver(FUNCTIONS, limits, OutputSink(4096), 0, 0.0)
    return await driver.replay(held.session, "", blob, [])


async def close_rebuilt() -> None:
    while _held:
        await _held.pop().close()


async def _main() -> None:
    pool = SandboxPool(max_processes=2)
    try:
        traces = [await trace(pool, program_source(blocks)) for blocks in FIXED_PROGRAMS]
    finally:
        await close_rebuilt()
        await pool.close()
    print(json.dumps(traces))


if __name__ == "__main__":
    asyncio.run(_main())
    sys.stdout.flush()
    # The Monty client's threads can abort the interpreter's own exit (SIGABRT after the output is out): the
    # traces are printed, so leave without it.
    os._exit(0)
