"""Where the Temporal dev server's CPU goes for each side: perf samples, by category and by RPC.

py-spy sees the workers; this sees the server, where the agent's throughput
gap against the hand-written loop is (``throughput.py``). Each side's work is
recorded with ``perf record`` (user-space CPU clock at ``FREQUENCY`` Hz, frame
pointer call chains, which Go keeps), the sides rotating which goes first.
The ``temporal`` binary is stripped, so every frame is named from the
binary's own function table (``go_symbols.py``). Counted per run (per step
with ``--steps``):

- by category: the first in ``CATEGORIES`` any frame of a sample matches;
- by RPC: the outermost gRPC handler on the sample's stack (``-`` for the
  server's own background work: task queues, timers, the collector).

Two shapes, on one fresh dev server with the transfer-task poll cap lifted:

- default: ``throughput.py``'s, ``--runs`` runs of a side started at once on
  one worker process that serves every side, ``--rounds`` batches a side;
- ``--steps K``: ``step_overhead.py``'s, one run of K steps a side a round.

perf's sampling costs the server a few percent, alike for every side. It
needs Linux ``perf`` (Debian ``linux-perf``) and
``kernel.perf_event_paranoid`` at 2 or less (a process's own children).

    .venv/bin/python bench/server_profile.py [--runs 40] [--rounds 4] [--sides agent,handwritten,bare] [--steps K]

The last line is one JSON object: for each side, server CPU ms per run (or
per step) by category and by RPC, the total, and each side's excess over the
hand-written loop's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import step_overhead
import throughput
from cpu import temporal_server_pids
from go_symbols import GoSymbols
from model_process import free_port
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.contracts import AgentSpec, LLMConfig

FREQUENCY = 1999
"""Samples a second: one sample is about 0.5 ms of server CPU."""

CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    (
        "visibility rows (start, upserts, close)",
        ("visibilityQueueTaskExecutor", "VisibilityStore", "visibilityManager"),
    ),
    (
        "search attributes (validate, upsert command)",
        ("go.temporal.io/server/common/searchattribute.", "AddUpsertWorkflowSearchAttributesEvent"),
    ),
    ("gzip of gRPC messages", ("compress/flate.", "compress/gzip.")),
    ("protobuf encode and decode", ("google.golang.org/protobuf/", "github.com/gogo/protobuf/")),
    ("garbage collector", ("runtime.gcBgMarkWorker", "runtime.gcAssist", "runtime.bgsweep")),
    ("history events (append, read)", ("AppendHistoryNodes", "ReadHistoryBranch", "readRawHistoryBranch")),
    (
        "mutable state (create, update, load)",
        ("CreateWorkflowExecution", "UpdateWorkflowExecution", "GetWorkflowExecution"),
    ),
    ("matching (task queues, dispatch)", ("go.temporal.io/server/service/matching.",)),
    ("periodic refreshes (namespaces, cluster metadata)", ("GetClusterMetadata", "GetNamespace", "ListNamespaces")),
]
OTHER = "other"
_RPC = re.compile(r"_(\w+)Service_(\w+)_Handler$")


class PerfUnavailable(RuntimeError):
    pass


def _check_perf() -> str:
    perf = shutil.which("perf")
    if perf is None:
        raise PerfUnavailable("perf is not installed: apt-get install linux-perf")
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    if int(paranoid) > 2:
        raise PerfUnavailable(f"kernel.perf_event_paranoid is {paranoid}: perf may not sample this process's children")
    return perf


@contextmanager
def recording(perf: str, pids: list[int], out: Path) -> Iterator[None]:
    """``perf record`` of ``pids`` while the block runs."""
    proc = subprocess.Popen(
        [
            perf,
            "record",
            "-q",
            "-e",
            "cpu-clock:u",
            "-F",
            str(FREQUENCY),
            "--call-graph",
            "fp",
            "-p",
            ",".join(map(str, pids)),
            "-o",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if proc.returncode not in (0, -2) or not out.exists():
            raise PerfUnavailable(f"perf record failed ({proc.returncode}): {err.decode(errors='replace')[-500:]}")


class Stacks:
    """Call chains (innermost first) of the samples in perf files, named from the server binary."""

    def __init__(self, perf: str, binary: str) -> None:
        self.perf = perf
        self.symbols = GoSymbols(binary)
        self.binary_name = Path(binary).name
        self._names: dict[int, str] = {}

    def read(self, data: Path) -> Iterator[list[str]]:
        # perf prints an address it cannot name relative to its mapping; the text maps at the ELF's load base.
        out = subprocess.run(
            [self.perf, "script", "-i", str(data), "-F", "ip,dso"], capture_output=True, text=True, check=True
        ).stdout
        chain: list[str] = []
        for line in out.splitlines():
            fields = line.split()
            if not fields:
                if chain:
                    yield chain
                chain = []
                continue
            try:
                address = int(fields[0], 16)
            except ValueError:
                continue
            if self.binary_name in line:
                address += self.symbols.load_base
            name = self._names.get(address)
            if name is None:
                name = self._names[address] = self.symbols.name(address)
            chain.append(name)
        if chain:
            yield chain


def category(chain: list[str]) -> str:
    for name, marks in CATEGORIES:
        if any(mark in frame for frame in chain for mark in marks):
            return name
    return OTHER


def rpc(chain: list[str]) -> str:
    handlers = [f"{m.group(1)}.{m.group(2)}" for frame in chain if (m := _RPC.search(frame))]
    return handlers[-1] if handlers else "-"


def tally(stacks: Stacks, files: list[Path], units: int) -> dict[str, dict[str, float]]:
    """Server CPU ms per unit (run or step), by category and by RPC."""
    by_category: Counter[str] = Counter()
    by_rpc: Counter[str] = Counter()
    named = total = 0
    for data in files:
        for chain in stacks.read(data):
            total += 1
            named += chain[0] != "?"
            by_category[category(chain)] += 1
            by_rpc[rpc(chain)] += 1
    if total and named / total < 0.9:
        raise PerfUnavailable(f"only {named} of {total} samples were named: is this the binary perf recorded?")
    ms = 1000 / FREQUENCY / units
    return {
        "by_category": {k: round(by_category[k] * ms, 2) for k in [c for c, _ in CATEGORIES] + [OTHER]},
        "by_rpc": {k: round(v * ms, 2) for k, v in by_rpc.most_common()},
        "total": round(total * ms, 2),
    }


async def throughput_shape(
    perf: str, env: WorkflowEnvironment, sides: list[str], runs: int, rounds: int, out: Path
) -> dict[str, list[Path]]:
    server = temporal_server_pids()
    files: dict[str, list[Path]] = {side: [] for side in sides}
    with (
        tempfile.TemporaryDirectory() as state,
        throughput.scripted_model_process(throughput.script(), free_port()) as model,
    ):
        task_queue = f"profile-{uuid.uuid4().hex[:6]}"
        address = env.client.service_client.config.target_host
        with throughput.worker_processes(1, address, task_queue, model.url, Path(state)) as workers:
            pids = {"worker": workers, "server": server, "model": [model.pid]}
            await asyncio.gather(*(throughput.RUNS[s](env.client, task_queue) for s in sides for _ in range(8)))
            for round_ in range(rounds):
                for side in sides[round_ % len(sides) :] + sides[: round_ % len(sides)]:
                    run = throughput.RUNS[side]
                    data = out / f"{side}-{round_}.data"
                    with recording(perf, server, data):
                        figure = await throughput.batch(lambda: run(env.client, task_queue), runs, pids)
                    files[side].append(data)
                    print(
                        f"round {round_} {side}: {runs / figure['seconds']:.1f} runs/s, server CPU "
                        f"{1000 * figure['server'] / runs:.1f} ms/run",
                        file=sys.stderr,
                        flush=True,
                    )
    return files


async def steps_shape(
    perf: str, env: WorkflowEnvironment, sides: list[str], steps: int, rounds: int, out: Path
) -> dict[str, list[Path]]:
    server = temporal_server_pids()
    port = free_port()
    files: dict[str, list[Path]] = {side: [] for side in sides}
    spec = AgentSpec(
        name="bench",
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=128_000),
        tools=["get_weather"],
        max_steps=steps + 1,
        token_budget=10**9,
    )
    pids = {"worker": [os.getpid()], "server": server}
    async with step_overhead.serving(env, port) as task_queue:
        for round_ in range(rounds):
            for side in sides[round_ % len(sides) :] + sides[: round_ % len(sides)]:
                data = out / f"{side}-{round_}.data"
                with recording(perf, server, data):
                    seconds, cpu, _ = await step_overhead.one_run(env, side, port, task_queue, spec, steps, pids)
                files[side].append(data)
                print(
                    f"round {round_} {side}: {1000 * seconds / (steps + 1):.1f} ms/step, server CPU "
                    f"{1000 * cpu['server'] / (steps + 1):.1f} ms/step",
                    file=sys.stderr,
                    flush=True,
                )
    return files


async def main(sides: list[str], runs: int, rounds: int, steps: int | None) -> dict:
    perf = _check_perf()
    stacks = Stacks(perf, os.path.realpath(temporal_binary()))
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    try:
        with tempfile.TemporaryDirectory() as out:
            if steps:
                files = await steps_shape(perf, env, sides, steps, rounds, Path(out))
                unit, per_side = "step", rounds * (steps + 1)
            else:
                files = await throughput_shape(perf, env, sides, runs, rounds, Path(out))
                unit, per_side = "run", rounds * runs
            figures = {side: tally(stacks, files[side], per_side) for side in sides}
    finally:
        await env.shutdown()
    summary: dict = {"unit": unit, "frequency_hz": FREQUENCY, "load_average": os.getloadavg(), "server_cpu_ms": figures}
    if "handwritten" in figures:
        hand = figures["handwritten"]["by_category"]
        summary["excess_over_handwritten_ms"] = {
            side: {k: round(v - hand[k], 2) for k, v in f["by_category"].items()}
            for side, f in figures.items()
            if side != "handwritten"
        }
    for side, f in figures.items():
        print(
            f"{side}: {f['total']} ms of server CPU a {unit}: "
            + ", ".join(f"{k} {v}" for k, v in f["by_category"].items()),
            file=sys.stderr,
        )
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sides", default="agent,handwritten,bare")
    parser.add_argument("--runs", type=int, default=40, help="runs a batch (throughput shape)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, help="one run of this many steps a side a round, instead of batches")
    args = parser.parse_args()
    chosen = args.sides.split(",")
    unknown = sorted(set(chosen) - set(throughput.RUNS))
    if unknown:
        parser.error(f"unknown sides {unknown}: choose from {sorted(throughput.RUNS)}")
    try:
        result = asyncio.run(main(chosen, args.runs, args.rounds, args.steps))
    except PerfUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        os._exit(2)
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
