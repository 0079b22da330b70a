"""A fleet-sized day: many open sessions on one dev server, and what each turn costs.

``--sessions`` sessions (default 10,000) are opened on one Temporal dev server
(the engine's own dev-server arguments, ``client/dev_server.py``), served by
``agentsteps worker`` processes (the deployed command; 1, then 3 of them:
``--workers``) that share an S3 payload store (moto on loopback, behind a
proxy that counts every request by kind) and a snapshot key. Every turn is
the scripted model asking for ``get_weather``, the tool's answer, and the
model's reply: two steps. ``--concurrent`` sessions (default 200) turn at any
moment. For each worker count:

1. **Open.** Each session's first turn (update-with-start). Worker RSS and
   ``temporal_sticky_cache_size`` are sampled before and after: memory per
   cached session is the RSS growth over the cached runs.
2. **Rounds.** ``--rounds`` times, every session (or ``--sample`` of them;
   with ``--every-session`` the first round turns all) takes two turns back to
   back: turn A finds it evicted from its worker's sticky cache when more
   sessions turned since its last turn than the cache holds (LRU, per
   worker: ``max_cached_workflows``, ``--cache``), so A replays its history;
   turn B, sent the moment A answered, finds it cached. Both run under the
   same load, so their p50 and p99 compare side by side. The workers'
   ``temporal_sticky_cache_miss_total`` over the rounds, per A turn, says
   whether the labels held. Sessions continue as new every few turns
   (``continue_after_events``), under that load.
3. **Store and bills.** S3 requests by kind (PUT, GET, HEAD, LIST, DELETE) and
   bytes written, objects and bytes added to the bucket, worker and server
   CPU, all per turn over the rounds; Temporal billable actions and history
   bytes per turn from one session's history (``billable.py``).
4. **Close and collect.** Half the sessions close; ``agentsteps payloads gc
   --delete`` runs over what they left (objects/s; its rate against the
   store's growth at the measured turn rate); then every open session takes
   one more turn, which fails typed (``PayloadMissingError``) if gc deleted
   anything live. The rest close.
5. **No leak.** Worker RSS after every session closed, then after a second
   batch (as many sessions as the caches hold) was opened and closed, each
   read after one of the workers' once-a-minute trims
   (``returning_freed_memory``): the first must be back within 30% of the
   start (where 60 sessions leave it), the second must not exceed the first beyond noise.

With 1 worker, the hand-written session loop (``handwritten_session.py``:
messages in the workflow, no store) runs the same turns beside the engine on
``--baseline`` sessions, measured the same way (CPU per turn, billable
actions and history bytes per turn).

The time-skipping test server is not used: it keeps no sticky queues (the
cache is what this measures) and lacks ``ListWorkflowExecutions`` (gc needs
it); nothing in a session depends on wall time between turns but its idle
timeout, so rounds minutes apart exercise the same code as days apart.

The last line is one JSON object; ``--write`` also writes the per-turn
figures ``docs/capacity.md`` is checked against (``bench/capacity.json``,
see ``capacity_model.py``).

    .venv/bin/python bench/fleet.py [--sessions 10000] [--workers 1,3] [--concurrent 200] [--cache 1000]
        [--rounds 2] [--baseline 200] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"
sys.path.insert(0, str(SUPPORT))  # the S3 proxy the soak uses

import boto3  # noqa: E402
import capacity_model  # noqa: E402
import httpx  # noqa: E402
from billable import billable_actions  # noqa: E402
from cpu import cpu_seconds, temporal_server_pids  # noqa: E402
from model_process import free_port, scripted_model_process  # noqa: E402
from s3_fault_proxy import FaultingS3Proxy  # noqa: E402
from temporalio.client import Client, WorkflowHandle  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary  # noqa: E402
from agentsteps.client.sessions import close_session, continue_session, send_turn  # noqa: E402
from agentsteps.contracts import AgentSpec, LLMConfig  # noqa: E402
from agentsteps.contracts.session import SessionConfig  # noqa: E402
from agentsteps.worker import RETURN_FREED_MEMORY_SECONDS  # noqa: E402

HERE = Path(__file__).resolve().parent
AGENTSTEPS = Path(sys.executable).with_name("agentsteps")
FIGURES = HERE / "capacity.json"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret", "AWS_REGION": "us-east-1"}
STEPS_PER_TURN = 2
SCRIPT = {
    "rules": [
        {"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
        {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "Sunny in Paris today."}},
    ]
}
SPEC = AgentSpec(
    name="fleet",
    model=LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=1_000_000),
    tools=["get_weather"],
    max_steps=4,
    token_budget=10**9,
)
CONTINUE_AFTER_EVENTS = 100
"""The least a session accepts (about four turns a run): sessions continue as new in the rounds, under load."""
SESSION_TURNS = 20
"""The turns of the one session each side runs alone for its bill (the capacity model's session)."""
SESSION = SessionConfig(continue_after_events=CONTINUE_AFTER_EVENTS, idle_timeout_seconds=30 * 86400)
PROBE = SessionConfig(continue_after_events=10_000, idle_timeout_seconds=30 * 86400)
"""One run for the whole probe: its history holds every turn it is charged for."""
PROGRESS_EVERY = 250
CURVE_EVERY = 1000
"""Sessions opened between two samples of worker RSS and cached runs."""
LEAK_SLACK = 0.05
"""RSS after the second open-and-close batch may exceed the first by this share (allocator noise)."""
RETURN_SLACK = 0.30
"""RSS after every session closed may exceed its start by this share and count as returned: one worker that had
served 60 sessions sat 24% over its start after they closed (what the first turns build and keep: imported
modules, converters, the bounded caches), so 10,000 sessions may leave no more than a few dozen do."""


async def after_a_trim() -> None:
    """Wait out one of the workers' trims (``returning_freed_memory``): the memory closed sessions freed is
    returned to the system at the next one, so RSS read sooner counts what the allocator merely holds."""
    await asyncio.sleep(RETURN_FREED_MEMORY_SECONDS + 5)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------------------------------------- S3 counting


class CountingS3Proxy(FaultingS3Proxy):
    """The soak's proxy with no faults, counting requests by kind and the bytes PUT."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, rate=0.0)
        self.kinds: Counter[str] = Counter()
        self.put_bytes = 0

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        line = head.split(b"\r\n", 1)[0].decode(errors="replace")
        method, _, target = line.partition(" ")
        if method == "GET" and ("list-type=" in target or target.split(" ")[0].rstrip("/").count("/") <= 1):
            kind = "LIST"
        elif method == "PUT" and "x-amz-copy-source" in head.decode(errors="replace").lower():
            kind = "COPY"
        elif method == "POST" and "delete" in target:
            kind = "DELETE"
        else:
            kind = method
        self.kinds[kind] += 1
        if method == "PUT":
            self.put_bytes += len(body)
        return await super()._forward(head, body)

    def snapshot(self) -> dict[str, int]:
        return {**self.kinds, "put_bytes": self.put_bytes}


async def wait_for_port(host: str, port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


def bucket_totals(s3: Any, bucket: str, prefix: str) -> tuple[int, int]:
    objects = size = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            objects += 1
            size += item["Size"]
    return objects, size


# ---------------------------------------------------------------------------------------------- workers


@dataclass
class Workers:
    env: dict[str, str]
    dir: Path
    procs: list[tuple[subprocess.Popen, int]] = field(default_factory=list)

    async def spawn(self, count: int) -> None:
        for i in range(count):  # one at a time: the first records the deployment's key id
            state = self.dir / f"worker-{len(self.procs)}"
            state.mkdir(parents=True)
            port = free_port()
            log = (state / "worker.log").open("w")
            proc = subprocess.Popen(
                [str(AGENTSTEPS), "worker"],
                env={**self.env, "AGENTSTEPS_STATE_DIR": str(state), "AGENTSTEPS_METRICS_PORT": str(port)},
                cwd=state,
                stdout=log,
                stderr=log,
            )
            await self._ready(proc, port, state)
            self.procs.append((proc, port))

    async def _ready(self, proc: subprocess.Popen, port: int, state: Path) -> None:
        deadline = time.monotonic() + 180
        async with httpx.AsyncClient() as http:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"worker exited at start: {(state / 'worker.log').read_text()[-2000:]}")
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/readyz", timeout=2)).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError("worker never became ready")
                await asyncio.sleep(0.3)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p, _ in self.procs]

    def rss(self) -> list[int]:
        return [rss_bytes(pid) for pid in self.pids]

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids)

    async def metric(self, name: str) -> float:
        """The sum of every sample of ``name`` over every worker's ``/metrics``."""
        pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.eE+-]+)$", re.M)
        total = 0.0
        async with httpx.AsyncClient() as http:
            for _, port in self.procs:
                text = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
                total += sum(float(v) for v in pattern.findall(text))
        return total

    def stop(self) -> None:
        for proc, _ in self.procs:
            proc.terminate()
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()


# ---------------------------------------------------------------------------------------------- the fleet


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"open": [], "evicted": [], "cached": []})
    turns: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


async def bounded(jobs: list[Callable[[], Awaitable[None]]], concurrent: int, until: float | None = None) -> int:
    """Run every job, ``concurrent`` at a time (a new one starts as one ends); none starts after the
    ``time.monotonic()`` deadline ``until``. Returns how many started."""
    queue = iter(jobs)
    started = 0

    async def lane() -> None:
        nonlocal started
        for job in queue:
            if until is not None and time.monotonic() > until:
                return
            started += 1
            await job()

    await asyncio.gather(*(lane() for _ in range(min(concurrent, len(jobs)))))
    return started


class Fleet:
    def __init__(self, client: Client, queue: str, tally: Tally, cpu: Callable[[], tuple[float, float]]) -> None:
        self.client, self.queue, self.tally, self.cpu = client, queue, tally, cpu
        self.done = 0
        self.mark = (time.perf_counter(), 0, *cpu())

    def progress(self) -> None:
        """A line every ``PROGRESS_EVERY`` turns answered: a long run shows its rate and CPU while it runs."""
        self.done += 1
        if self.done % PROGRESS_EVERY:
            return
        now, (worker, server) = time.perf_counter(), self.cpu()
        t0, n0, w0, s0 = self.mark
        turns = self.done - n0
        self.mark = (now, self.done, worker, server)
        say(
            f"    {self.done} turns answered: {turns / (now - t0):.1f} a second, worker"
            f" {1000 * (worker - w0) / turns:.0f} ms and server {1000 * (server - s0) / turns:.0f} ms CPU a turn,"
            f" {sum(self.tally.failed.values())} failed, load {os.getloadavg()[0]:.1f}"
        )

    async def turn(self, sid: str, label: str, first: bool = False) -> None:
        text = f"{sid}: the weather, please"
        started = time.perf_counter()
        self.tally.turns += 1
        try:
            if first:
                await send_turn(self.client, SPEC, text, session_id=sid, task_queue=self.queue, config=SESSION)
            else:
                await continue_session(self.client, sid, text)
        except Exception as exc:  # noqa: BLE001 - every failure is counted, by type
            cause: BaseException | None = exc
            while cause.__cause__ is not None:
                cause = cause.__cause__
            kind = getattr(cause, "type", None) or type(cause).__name__
            self.tally.failed[kind] += 1
            if len(self.tally.failures) < 20:
                self.tally.failures.append(f"{sid} {label}: {kind}: {str(cause)[:300]}")
            return
        self.tally.latencies[label].append(time.perf_counter() - started)
        self.progress()

    async def close(self, sid: str) -> None:
        try:
            await close_session(self.client, sid)
        except Exception as exc:  # noqa: BLE001
            self.tally.failed[f"close:{type(exc).__name__}"] += 1


async def configuration(
    args: argparse.Namespace,
    env: WorkflowEnvironment,
    workers_count: int,
    base_env: dict[str, str],
    proxy: CountingS3Proxy,
    s3: Any,
    bucket: str,
    model_url: str,
    workdir: Path,
) -> dict[str, Any]:
    client = env.client
    run = uuid.uuid4().hex[:6]
    queue, prefix = f"fleet-{workers_count}-{run}", f"fleet-{workers_count}-{run}/"
    worker_env = {
        **base_env,
        "AGENTSTEPS_TASK_QUEUE": queue,
        "AGENTSTEPS_PAYLOAD_S3_PREFIX": prefix,
        "AGENTSTEPS_MAX_CACHED_WORKFLOWS": str(args.cache),
        # The deployed slots (deploy/k8s/configmap.yaml), not the SDK's 100: a worker holding 100 workflow
        # tasks it cannot run within the task timeout (10 s) lets them time out and be redone, and the
        # turns waiting on them fail (50 of 2,750 opens, 200 at once, on one worker at load 11).
        "AGENTSTEPS_MAX_CONCURRENT_WORKFLOW_TASKS": str(args.workflow_task_slots),
        "AGENTSTEPS_MAX_CONCURRENT_ACTIVITIES": str(args.activity_slots),
    }
    workers = Workers(worker_env, workdir / f"workers-{workers_count}")
    await workers.spawn(workers_count)
    server = temporal_server_pids()
    tally = Tally()
    fleet = Fleet(client, queue, tally, lambda: (workers.cpu(), sum(cpu_seconds(p) for p in server)))
    n = args.sessions
    sids = [f"fleet-{run}-{i}" for i in range(n)]
    figure: dict[str, Any] = {"workers": workers_count, "max_cached_workflows": args.cache}
    try:
        # Warm-up, not counted: imports, sandbox, connections in every worker.
        warm = [f"fleet-{run}-warm-{i}" for i in range(4 * workers_count)]
        await bounded([lambda s=s: fleet.turn(s, "open", first=True) for s in warm], args.concurrent)
        await bounded([lambda s=s: fleet.close(s) for s in warm], args.concurrent)
        tally.latencies["open"].clear()
        tally.turns = 0
        await asyncio.sleep(1)
        rss_start = workers.rss()
        cache_start = await workers.metric("temporal_sticky_cache_size")

        say(f"[{workers_count} worker(s)] opening {n} sessions, {args.concurrent} at a time")
        # In two parts: up to the caches' size (RSS grows with cached runs and with everything else a session
        # leaves: allocator, the conversation-prefix cache), then the rest (everything else only). The
        # difference of the two slopes is what a cached run costs.
        fill = min(n, args.cache * workers_count)
        began = time.perf_counter()
        until = time.monotonic() + args.open_seconds if args.open_seconds else None
        await bounded([lambda s=s: fleet.turn(s, "open", first=True) for s in sids[:fill]], args.concurrent)
        await asyncio.sleep(1)
        rss_full, cache_full = workers.rss(), await workers.metric("temporal_sticky_cache_size")
        curve = [[fill, round(sum(rss_full) / 2**20, 1), cache_full]]
        opened = fill
        while opened < n and (until is None or time.monotonic() < until):
            chunk = sids[opened : opened + CURVE_EVERY]
            opened += await bounded(
                [lambda s=s: fleet.turn(s, "open", first=True) for s in chunk], args.concurrent, until
            )
            curve.append(
                [opened, round(sum(workers.rss()) / 2**20, 1), await workers.metric("temporal_sticky_cache_size")]
            )
            say(f"  {opened} sessions open; RSS {curve[-1][1]} MiB, {curve[-1][2]:.0f} cached")
        open_seconds = time.perf_counter() - began
        if opened < n:
            say(f"  the open phase ran out of time at {opened} of {n} sessions (--open-seconds {args.open_seconds})")
            n, sids = opened, sids[:opened]
        sample = sids[: args.sample] if args.sample else sids
        await asyncio.sleep(1)
        rss_open = workers.rss()
        cache_open = await workers.metric("temporal_sticky_cache_size")
        cached_added = cache_full - cache_start
        slope_with_cache = (sum(rss_full) - sum(rss_start)) / max(fill, 1)
        slope_without = (sum(rss_open) - sum(rss_full)) / (n - fill) if n > fill else 0.0
        figure["open"] = {
            "sessions": n,
            "asked": args.sessions,
            "rss_mib_by_open_sessions": [[o, r, c] for o, r, c in curve],
            "seconds": round(open_seconds, 1),
            "turns_per_s": round(n / open_seconds, 1),
            "rss_start_mib": [round(r / 2**20, 1) for r in rss_start],
            "rss_cache_full_mib": [round(r / 2**20, 1) for r in rss_full],
            "rss_open_mib": [round(r / 2**20, 1) for r in rss_open],
            "cached_workflows": cache_open,
            "rss_growth_per_session_while_caching_kib": round(slope_with_cache / 1024, 1),
            "rss_growth_per_session_cache_full_kib": round(slope_without / 1024, 1),
            "rss_per_cached_session_kib": round(
                (slope_with_cache - slope_without) * fill / max(cached_added, 1) / 1024, 1
            ),
        }
        say(f"  opened in {open_seconds:.0f} s; cache {cache_open:.0f}; RSS {figure['open']['rss_open_mib']} MiB")

        # Rounds: A (evicted when the fleet overflows the caches), then B at once (cached).
        evicting = (n - 1) / workers_count > 1.5 * args.cache
        # Later rounds turn the sample only: its sessions are evicted again only if it overflows the caches.
        evicting_later = (len(sample) - 1) / workers_count > 1.5 * args.cache
        before = {
            "s3": proxy.snapshot(),
            "bucket": bucket_totals(s3, bucket, prefix),
            "worker_cpu": workers.cpu(),
            "server_cpu": sum(cpu_seconds(p) for p in server),
            "misses": await workers.metric("temporal_sticky_cache_miss_total"),
            "rebuilds": await workers.metric("agentsteps_workflow_replay_seconds_count"),
            "replay_s": await workers.metric("agentsteps_workflow_replay_seconds_sum"),
            "continued": await workers.metric("agentsteps_session_continued_as_new_total"),
            "turns": tally.turns,
        }
        began = time.perf_counter()
        a_turns = 0
        for r in range(args.rounds):
            a_evicted = evicting if r == 0 else evicting_later
            turning = sids if r == 0 and args.every_session else sample
            a_turns += len(turning)
            say(
                f"  round {r + 1}/{args.rounds}: {len(turning)} sessions, two turns each,"
                f" A {'evicted' if a_evicted else 'cached'}"
            )

            async def pair(sid: str, a_evicted: bool = a_evicted) -> None:
                await fleet.turn(sid, "evicted" if a_evicted else "cached")
                await fleet.turn(sid, "cached")

            await bounded([lambda s=s: pair(s) for s in turning], args.concurrent)
        round_seconds = time.perf_counter() - began
        turns = tally.turns - before["turns"]
        after_s3 = proxy.snapshot()
        objects, size = bucket_totals(s3, bucket, prefix)
        misses = await workers.metric("temporal_sticky_cache_miss_total") - before["misses"]
        rebuilds = await workers.metric("agentsteps_workflow_replay_seconds_count") - before["rebuilds"]
        replay_s = await workers.metric("agentsteps_workflow_replay_seconds_sum") - before["replay_s"]
        continued = await workers.metric("agentsteps_session_continued_as_new_total") - before["continued"]
        s3_per_turn = {k: round((after_s3.get(k, 0) - before["s3"].get(k, 0)) / turns, 3) for k in after_s3}
        figure["rounds"] = {
            "turns": turns,
            "seconds": round(round_seconds, 1),
            "turns_per_s": round(turns / round_seconds, 2),
            "a_turns_evicted": evicting,
            "sessions": len(sids) if args.every_session else len(sample),
            "a_turns": a_turns,
            "sticky_cache_misses_per_a_turn": round(misses / a_turns, 3),
            "rebuilds_per_a_turn": round(rebuilds / a_turns, 3),
            "replay_ms_per_rebuild": round(1000 * replay_s / rebuilds, 2) if rebuilds else None,
            "continued_as_new": int(continued),
            "rss_mib": [round(r / 2**20, 1) for r in workers.rss()],
            "cached_workflows": await workers.metric("temporal_sticky_cache_size"),
        }
        figure["per_turn"] = {
            "worker_cpu_ms": round(1000 * (workers.cpu() - before["worker_cpu"]) / turns, 2),
            "server_cpu_ms": round(1000 * (sum(cpu_seconds(p) for p in server) - before["server_cpu"]) / turns, 2),
            "s3_requests": s3_per_turn,
            "store_objects": round((objects - before["bucket"][0]) / turns, 3),
            "store_bytes": round((size - before["bucket"][1]) / turns, 1),
        }
        figure["latency_ms"] = {
            label: {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99), "n": len(values)}
            for label, values in tally.latencies.items()
        }
        say(f"  rounds: {turns} turns in {round_seconds:.0f} s; latency {figure['latency_ms']}")

        # The same comparison without the load: the oldest sessions, one at a time, evicted then cached.
        quiet: dict[str, list[float]] = {"evicted": [], "cached": []}
        for sid in sids[: args.quiet]:
            for label in ("evicted" if evicting else "cached", "cached"):
                t0 = time.perf_counter()
                await continue_session(client, sid, "the weather, please")
                quiet[label].append(time.perf_counter() - t0)
        figure["latency_quiet_ms"] = {
            label: {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99), "n": len(values)}
            for label, values in quiet.items()
        }
        say(f"  quiet: {figure['latency_quiet_ms']}")

        # Billable actions and history bytes per turn: one session, alone, from a fresh run.
        probe = f"fleet-{run}-probe"
        probe_turns = 4
        await send_turn(client, SPEC, "probe", session_id=probe, task_queue=queue, config=PROBE)
        first = await billable_actions(client, probe)
        for _ in range(probe_turns):
            await continue_session(client, probe, "the weather, please")
        last = await billable_actions(client, probe)
        figure["per_turn"]["billable_actions"] = round((last["total"] - first["total"]) / probe_turns, 2)
        figure["per_turn"]["history_bytes"] = round((last["history_bytes"] - first["history_bytes"]) / probe_turns)
        figure["per_turn"]["billable_by_kind"] = {
            k: round((last.get(k, 0) - first.get(k, 0)) / probe_turns, 2) for k in last if k not in ("history_bytes",)
        }
        await fleet.close(probe)

        # Close half, gc what they left, then every open session turns once more (gc deleted nothing live).
        closing, staying = sids[::2], sids[1::2]
        await bounded([lambda s=s: fleet.close(s) for s in closing], args.concurrent)
        await asyncio.sleep(2.5)
        objects_before_gc, bytes_before_gc = bucket_totals(s3, bucket, prefix)
        s3_before_gc = proxy.snapshot()
        gc_began = time.perf_counter()
        gc = await asyncio.to_thread(
            subprocess.run,
            [str(AGENTSTEPS), "payloads", "gc", "--older-than", "2s", "--delete", "--json"],
            env=worker_env,
            capture_output=True,
            text=True,
        )
        gc_seconds = time.perf_counter() - gc_began
        if gc.returncode != 0:
            raise RuntimeError(f"payloads gc failed: {gc.stderr[-1500:]}")
        report = json.loads(gc.stdout.strip().splitlines()[-1])
        s3_after_gc = proxy.snapshot()
        objects_after_gc, _ = bucket_totals(s3, bucket, prefix)
        failed_before = sum(tally.failed.values())
        # The open sessions of the sample, and as many more as the sample again, from the last opened: each
        # turn reads its conversation back (the worker's conversation cache holds a few hundred at most).
        still_open = set(staying)
        checked = [s for s in sample if s in still_open] + staying[-len(sample) :]
        checked = list(dict.fromkeys(checked))
        say(f"  gc took {gc_seconds:.0f} s; {len(checked)} open sessions turn once more")
        await bounded([lambda s=s: fleet.turn(s, "cached") for s in checked], args.concurrent)
        live_lost = sum(tally.failed.values()) - failed_before
        store_growth = figure["per_turn"]["store_objects"] * figure["rounds"]["turns_per_s"]
        examined = len(report["garbage"]) + report["referenced"] + report["recent"]
        figure["gc"] = {
            "seconds": round(gc_seconds, 1),
            "open_sessions": len(staying),
            "closed_sessions": len(closing),
            "live_sessions_turned_after": len(checked),
            "s3_requests": {k: s3_after_gc.get(k, 0) - s3_before_gc.get(k, 0) for k in s3_after_gc if k != "put_bytes"},
            "objects_before": objects_before_gc,
            "bytes_before": bytes_before_gc,
            "examined": examined,
            "deleted": len(report["garbage"]),
            "deleted_bytes": report.get("garbage_bytes"),
            "objects_after": objects_after_gc,
            "failed": len(report.get("failed", [])),
            "examined_per_s": round(examined / gc_seconds, 1),
            "deleted_per_s": round(len(report["garbage"]) / gc_seconds, 1),
            "store_growth_objects_per_s": round(store_growth, 2),
            "keeps_up": examined / gc_seconds > store_growth,
            "live_turns_failed_after_gc": live_lost,
        }
        say(f"  gc: {figure['gc']}")
        await bounded([lambda s=s: fleet.close(s) for s in staying], args.concurrent)
        await after_a_trim()
        rss_closed = workers.rss()
        cache_closed = await workers.metric("temporal_sticky_cache_size")

        # A second batch, as many as the caches hold, opened and closed: RSS must not climb again.
        second = [f"fleet-{run}-again-{i}" for i in range(min(n, args.second or args.cache * workers_count))]
        await bounded([lambda s=s: fleet.turn(s, "open", first=True) for s in second], args.concurrent)
        await bounded([lambda s=s: fleet.close(s) for s in second], args.concurrent)
        await after_a_trim()
        rss_again = workers.rss()
        figure["memory"] = {
            "rss_start_mib": sum(rss_start) / 2**20,
            "rss_closed_mib": round(sum(rss_closed) / 2**20, 1),
            "rss_after_second_batch_mib": round(sum(rss_again) / 2**20, 1),
            "cached_after_close": cache_closed - cache_start,
            "leak": sum(rss_again) > (1 + LEAK_SLACK) * sum(rss_closed),
            "returned_to_start": sum(rss_closed) <= (1 + RETURN_SLACK) * sum(rss_start),
        }
        figure["turns_failed"] = dict(tally.failed)
        figure["failures"] = tally.failures
        if workers_count == 1 and args.baseline:
            figure["handwritten"] = await handwritten(args, env, workers, queue, model_url, server)
        return figure
    finally:
        workers.stop()


async def handwritten(
    args: argparse.Namespace, env: WorkflowEnvironment, workers: Workers, queue: str, model_url: str, server: list[int]
) -> dict[str, Any]:
    """The same turns through the engine and the hand-written session loop, side by side, ``--baseline`` each."""
    client = env.client
    address = client.service_client.config.target_host
    hand_queue = f"{queue}-hand"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "handwritten_session.py"), address, hand_queue, model_url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE,
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the hand-written worker exited with {proc.wait()}")
        count, rounds = args.baseline, 3
        run = uuid.uuid4().hex[:6]
        hand_handles: dict[str, WorkflowHandle] = {}

        async def hand_turn(sid: str) -> None:
            if sid not in hand_handles:
                hand_handles[sid] = await client.start_workflow("HandwrittenSession", id=sid, task_queue=hand_queue)
            await hand_handles[sid].execute_update("turn", "the weather, please", result_type=str)

        async def ours_turn(sid: str, first: bool) -> None:
            if first:
                await send_turn(client, SPEC, "the weather, please", session_id=sid, task_queue=queue, config=PROBE)
            else:
                await continue_session(client, sid, "the weather, please")

        sides: dict[str, dict[str, float]] = {"engine": Counter(), "handwritten": Counter()}
        for r in range(rounds):
            for side in ("engine", "handwritten") if r % 2 == 0 else ("handwritten", "engine"):
                pids = workers.pids if side == "engine" else [proc.pid]
                w0, s0, t0 = sum(cpu_seconds(p) for p in pids), sum(cpu_seconds(p) for p in server), time.perf_counter()
                if side == "engine":
                    jobs = [lambda i=i: ours_turn(f"fleet-base-{run}-{i}", r == 0) for i in range(count)]
                else:
                    jobs = [lambda i=i: hand_turn(f"fleet-hand-{run}-{i}") for i in range(count)]
                await bounded(jobs, args.concurrent)
                sides[side]["seconds"] += time.perf_counter() - t0
                sides[side]["worker_cpu"] += sum(cpu_seconds(p) for p in pids) - w0
                sides[side]["server_cpu"] += sum(cpu_seconds(p) for p in server) - s0
        turns = count * rounds
        alone = await session_alone(client, queue, hand_queue)
        engine_bill = await billable_actions(client, f"fleet-base-{run}-0")
        hand_bill = await billable_actions(client, f"fleet-hand-{run}-0")
        out: dict[str, Any] = {"sessions": count, "turns_each": rounds, "session_of_20_turns": alone}
        for side, bill in (("engine", engine_bill), ("handwritten", hand_bill)):
            s = sides[side]
            out[side] = {
                "turns_per_s": round(turns / s["seconds"], 2),
                "worker_cpu_ms_per_turn": round(1000 * s["worker_cpu"] / turns, 2),
                "server_cpu_ms_per_turn": round(1000 * s["server_cpu"] / turns, 2),
                # The first turn's run (a session starts with its first turn): actions over its turns.
                "billable_actions_per_turn": round((bill["total"] - bill.get("start", 0)) / rounds, 2),
                "history_bytes_per_turn": round(bill["history_bytes"] / rounds),
            }
        for i in range(count):
            await hand_handles[f"fleet-hand-{run}-{i}"].execute_update("close")
            await close_session(client, f"fleet-base-{run}-{i}")
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def session_alone(client: Client, queue: str, hand_queue: str) -> dict[str, dict[str, int]]:
    """One session of ``SESSION_TURNS`` turns a side, alone, with the default session settings: its bill."""
    run = uuid.uuid4().hex[:6]
    ours, theirs = f"fleet-alone-{run}", f"fleet-alone-hand-{run}"
    await send_turn(client, SPEC, "the weather, please", session_id=ours, task_queue=queue)
    for _ in range(SESSION_TURNS - 1):
        await continue_session(client, ours, "the weather, please")
    handle = await client.start_workflow("HandwrittenSession", id=theirs, task_queue=hand_queue)
    for _ in range(SESSION_TURNS):
        await handle.execute_update("turn", "the weather, please", result_type=str)
    bills = {"engine": await billable_actions(client, ours), "handwritten": await billable_actions(client, theirs)}
    await close_session(client, ours)
    await handle.execute_update("close")
    return bills


async def main(args: argparse.Namespace, workdir: Path, model_url: str) -> dict[str, Any]:
    # S3 in its own process: in this one its threads would take the GIL from the clients under measurement.
    host, port = "127.0.0.1", free_port()
    moto = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", host, "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    await wait_for_port(host, port)
    bucket = f"fleet-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://{host}:{port}",
        region_name=CREDENTIALS["AWS_REGION"],
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    s3.create_bucket(Bucket=bucket)
    proxy = CountingS3Proxy(f"http://{host}:{port}")
    endpoint = await proxy.start()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args() + [a for p in args.sqlite_pragma for a in ("--sqlite-pragma", p)],
        dev_server_database_filename=str(args.server_db) if args.server_db else None,
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    base_env = {
        **os.environ,
        **CREDENTIALS,
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "AGENTSTEPS_SNAPSHOT_KEY": "fleet-deployment-key-0123456789abcdef",
        "AGENTSTEPS_PAYLOAD_S3_BUCKET": bucket,
        "AWS_ENDPOINT_URL": endpoint,
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "unused",
        "AGENTSTEPS_SANDBOX_PROCESSES": "1",
    }
    config = workdir / "agentsteps.toml"
    config.write_text('[worker]\ntool_factories = ["agentsteps.examples.demo_tools:build_registry"]\n')
    base_env["AGENTSTEPS_CONFIG"] = str(config)
    load = [os.getloadavg()]
    began = time.monotonic()
    try:
        by_workers = {}
        for count in args.workers:
            by_workers[str(count)] = await configuration(
                args, env, count, base_env, proxy, s3, bucket, model_url, workdir
            )
            load.append(os.getloadavg())
            say(f"[{count} worker(s)] " + json.dumps(by_workers[str(count)]))  # kept if a later one never ends
    finally:
        await env.shutdown()
        await proxy.stop()
        moto.terminate()
        moto.wait(timeout=30)
    return summary(args, by_workers, load, time.monotonic() - began)


def summary(args: argparse.Namespace, by_workers: dict[str, Any], load: list[Any], wall: float) -> dict[str, Any]:
    def ratio(figure: dict[str, Any], q: str) -> float | None:
        evicted, cached = figure["latency_ms"]["evicted"][q], figure["latency_ms"]["cached"][q]
        return round(evicted / cached, 3) if evicted and cached else None

    targets = {}
    for count, figure in by_workers.items():
        targets[count] = {
            "evicted_p50_over_cached_p50": ratio(figure, "p50"),
            "evicted_p99_over_cached_p99": ratio(figure, "p99"),
            "evicted_p50_le_2x_cached": (ratio(figure, "p50") or 0) <= 2.0,
            "turns_lost": sum(figure["turns_failed"].values()),
            "memory_flat_after_close": not figure["memory"]["leak"],
            "memory_returned_to_start": figure["memory"]["returned_to_start"],
            "gc_keeps_up": figure["gc"]["keeps_up"],
            "gc_deleted_nothing_live": figure["gc"]["live_turns_failed_after_gc"] == 0,
        }
    return {
        "sessions": args.sessions,
        "concurrent": args.concurrent,
        "rounds": args.rounds,
        "steps_per_turn": STEPS_PER_TURN,
        "continue_after_events": CONTINUE_AFTER_EVENTS,
        "cpus": os.cpu_count(),
        "load_average": [[round(x, 2) for x in entry] for entry in load],
        "wall_seconds": round(wall, 1),
        "targets": targets,
        "by_workers": by_workers,
    }


def run_figures(figure: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """One worker count's fleet figures, as docs/capacity.md's "What the fleet run showed" table reads them."""
    latency, quiet = figure["latency_ms"], figure.get("latency_quiet_ms", {})
    gc = figure["gc"]
    return {
        "measured": time.strftime("%Y-%m-%d", time.gmtime()),
        "sessions": figure["open"].get("sessions", result["sessions"]),
        "concurrent": result["concurrent"],
        "opens_per_s": figure["open"]["turns_per_s"],
        "rounds_sessions": figure["rounds"].get("sessions", result["sessions"]),
        "rss_mib_by_open_sessions": figure["open"].get("rss_mib_by_open_sessions"),
        "max_cached_workflows": figure["max_cached_workflows"],
        "a_turns_evicted": figure["rounds"]["a_turns_evicted"],
        "turns_per_s": figure["rounds"]["turns_per_s"],
        "cached_p50_ms": latency["cached"]["p50"],
        "cached_p99_ms": latency["cached"]["p99"],
        "evicted_p50_ms": latency["evicted"]["p50"],
        "evicted_p99_ms": latency["evicted"]["p99"],
        "quiet_cached_p50_ms": quiet.get("cached", {}).get("p50"),
        "quiet_evicted_p50_ms": quiet.get("evicted", {}).get("p50"),
        "misses_per_evicted_turn": figure["rounds"]["sticky_cache_misses_per_a_turn"],
        "replay_ms_per_rebuild": figure["rounds"].get("replay_ms_per_rebuild"),
        "continued_as_new": figure["rounds"]["continued_as_new"],
        "rss_per_cached_session_kib": figure["open"]["rss_per_cached_session_kib"],
        "rss_start_mib": round(sum(figure["open"]["rss_start_mib"]), 1),
        "rss_closed_mib": figure["memory"]["rss_closed_mib"],
        "rss_after_second_batch_mib": figure["memory"]["rss_after_second_batch_mib"],
        "rss_returned_to_start": figure["memory"]["returned_to_start"],
        "cached_after_close": figure["memory"]["cached_after_close"],
        "turns_failed": sum(figure["turns_failed"].values()),
        "gc_open_sessions": figure["gc"]["open_sessions"],
        "gc_seconds": figure["gc"]["seconds"],
        "gc_open_histories_per_s": round(figure["gc"]["open_sessions"] / figure["gc"]["seconds"], 1),
        "gc_examined_per_s": figure["gc"]["examined_per_s"],
        "gc_deleted": figure["gc"]["deleted"],
        "store_growth_objects_per_s": figure["gc"]["store_growth_objects_per_s"],
        "live_turns_failed_after_gc": figure["gc"]["live_turns_failed_after_gc"],
        "gc_deleted_per_s": gc.get("deleted_per_s"),
        "gc_failed": gc.get("failed"),
        "gc_s3_requests": gc.get("s3_requests"),
        "gc_live_sessions_turned_after": gc.get("live_sessions_turned_after"),
    }


def per_turn_figures(result: dict[str, Any]) -> dict[str, Any]:
    """What ``capacity.json`` keeps, with provenance. CPU and bills: one worker, the engine and the hand-written
    loop side by side on the same turns (bills from one session of ``SESSION_TURNS`` turns a side). Store traffic:
    the run with the most workers, where sessions move between workers as they do in a fleet."""
    counts = sorted(result["by_workers"], key=int)
    one, most = result["by_workers"][counts[0]], result["by_workers"][counts[-1]]
    hand = one.get("handwritten", {})
    alone = hand.get("session_of_20_turns", {})

    def bill(side: str, key: str) -> float | None:
        return round(alone[side][key] / SESSION_TURNS, 2) if side in alone else None

    def side_cpu(side: str, key: str) -> float | None:
        return hand.get(side, {}).get(key)

    s3 = most["per_turn"]["s3_requests"]
    return {
        "measured": time.strftime("%Y-%m-%d", time.gmtime()),
        "by": "bench/fleet.py",
        "sessions": result["sessions"],
        "concurrent": result["concurrent"],
        "workers": [int(c) for c in counts],
        "load_average": result["load_average"],
        "steps_per_turn": STEPS_PER_TURN,
        "session_turns": SESSION_TURNS,
        "engine": {
            "billable_actions": bill("engine", "total"),
            "history_bytes": bill("engine", "history_bytes"),
            "s3_put": round(s3.get("PUT", 0) + s3.get("COPY", 0), 3),
            "s3_get": round(s3.get("GET", 0) + s3.get("HEAD", 0), 3),
            "s3_list": s3.get("LIST", 0),
            "store_objects": most["per_turn"]["store_objects"],
            "store_bytes": most["per_turn"]["store_bytes"],
            "gc_objects_per_s": most["gc"]["examined_per_s"],
            "worker_cpu_ms": side_cpu("engine", "worker_cpu_ms_per_turn"),
            "server_cpu_ms": side_cpu("engine", "server_cpu_ms_per_turn"),
        },
        "handwritten": {
            "billable_actions": bill("handwritten", "total"),
            "history_bytes": bill("handwritten", "history_bytes"),
            "s3_put": 0,
            "s3_get": 0,
            "s3_list": 0,
            "store_objects": 0,
            "store_bytes": 0,
            "worker_cpu_ms": side_cpu("handwritten", "worker_cpu_ms_per_turn"),
            "server_cpu_ms": side_cpu("handwritten", "server_cpu_ms_per_turn"),
        },
        "runs": {count: run_figures(figure, result) for count, figure in result["by_workers"].items()},
    }


def written_figures(result: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """What ``--write`` leaves in ``bench/capacity.json``: the per-turn bill needs the hand-written loop beside the
    engine, which only a 1-worker run measures; a run without it adds its worker counts' rows and keeps the bill."""
    if any("handwritten" in figure for figure in result["by_workers"].values()):
        return capacity_model.merged(per_turn_figures(result), previous)
    runs = {count: run_figures(figure, result) for count, figure in result["by_workers"].items()}
    return capacity_model.merged({"runs": runs}, previous)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--workers", default="1,3", help="comma-separated worker process counts, each in turn")
    parser.add_argument("--concurrent", type=int, default=200, help="sessions turning at any moment")
    parser.add_argument("--cache", type=int, default=1000, help="max_cached_workflows of each worker")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of two turns (evicted, then cached) each")
    parser.add_argument("--baseline", type=int, default=200, help="sessions of each side in the hand-written run")
    parser.add_argument("--quiet", type=int, default=20, help="sessions turned one at a time (evicted, cached)")
    parser.add_argument("--workflow-task-slots", type=int, default=10, help="per worker (deploy/k8s: 10)")
    parser.add_argument("--activity-slots", type=int, default=40, help="per worker (deploy/k8s: 40)")
    parser.add_argument("--open-seconds", type=float, default=0, help="stop opening sessions after this (0: never)")
    parser.add_argument("--sample", type=int, default=0, help="sessions in the rounds and the post-gc turns (0: all)")
    parser.add_argument(
        "--every-session", action="store_true", help="the first round turns every open session; --sample the later ones"
    )
    parser.add_argument("--second", type=int, default=0, help="the leak check's second batch (0: the caches' size)")
    parser.add_argument("--write", action="store_true", help=f"write the per-turn figures to {FIGURES.name}")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--server-db", type=Path, default=None, help="the dev server's SQLite file (default: memory)")
    parser.add_argument("--sqlite-pragma", action="append", default=[], help="PRAGMA=VALUE for the dev server")
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    return args


def run(argv: list[str] | None = None) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        with scripted_model_process(SCRIPT, free_port()) as model:
            result = asyncio.run(main(args, workdir, model.url))
    if args.write:
        previous = json.loads(FIGURES.read_text()) if FIGURES.exists() else {}
        FIGURES.write_text(json.dumps(written_figures(result, previous), indent=2) + "\n")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    status = 1
    try:
        status = run()
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 2
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        os._exit(status)  # temporalio issue #300
