"""Streams that survive anything: SIGKILLed workers, dropped readers, continue-as-new, 200 readers.

One dev server, the scripted model (each answer ~400 characters as 4-character
deltas 10 ms apart, the pace of a real model) and two worker processes on one
queue. Three parts, side by side in one run:

1. **Kills and drops.** ``--turns`` streamed turns on one session (which
   continues-as-new every few turns). In each, a worker is SIGKILLed at a
   random position of the answer (the one running the ``llm.call``, so the
   retried call streams the answer again from the start on the other worker,
   and a fresh worker takes the dead one's place), and the reader drops its
   connection at another random position and resumes from its last position
   after a random pause. Every reader's transcript must equal the completed
   answer, with 0 duplicates (text shown twice), 0 gaps (a hole), the last
   event saying the two agree, and a late reader of the ended turn must get
   the same. Latency is from the moment the model server wrote a piece of
   text (the attempt that the reader's text came from) to the moment the
   reader had it: p50 and p99 over every piece.
2. **Beside a turn without streaming.** ``--plain`` turns each way, no kills:
   a turn's wall time with the stream followed vs without streaming at all (the
   answer after the same 1 s).
3. **200 readers.** A refund that waits for approval, approved, then the
   session closed: with no reader, and with ``--readers`` readers of the
   session in this process, alternating, medians of ``--rounds``.

    .venv/bin/python bench/stream_resume.py [--turns 100] [--readers 200] [--rounds 5] [--plain 5]

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"
sys.path.insert(0, str(SUPPORT))

from process_support import kill, start_worker_process  # noqa: E402

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary  # noqa: E402
from agentsteps.client.session_stream import feeds_open, follow  # noqa: E402
from agentsteps.client.sessions import close_session, continue_session, decide_approval, pending_approvals  # noqa: E402
from agentsteps.client.transcript import StreamItem, apply  # noqa: E402
from agentsteps.contracts import AgentSpec, LLMConfig  # noqa: E402
from agentsteps.contracts.names import SESSION_WORKFLOW  # noqa: E402
from agentsteps.contracts.session import SessionConfig, SessionInput  # noqa: E402
from agentsteps.contracts.spec import ActivityPolicy  # noqa: E402
from agentsteps.scripted_model import ScriptedModelServer  # noqa: E402
from agentsteps.scripted_model import server as scripted_server  # noqa: E402

WORKER = SUPPORT / "worker_process.py"
ANSWER = ("Your refund for order A-17 is on its way and will reach the card within three working days. " * 5)[:400]
CHUNK, DELAY = 4, 0.01
SCRIPT = {
    "rules": [
        {"match": {"contains": "plain"}, "reply": {"content": ANSWER, "delay_seconds": len(ANSWER) / CHUNK * DELAY}},
        {"match": {"tool_result_for": "refund_order"}, "reply": {"content": "Refund issued."}},
        {
            "match": {"contains": "refund"},
            "reply": {"tool_calls": [{"name": "refund_order", "arguments": {"order_id": "A-17", "amount_eur": 20}}]},
        },
    ],
    "default": {"content": ANSWER, "stream": {"chunk_chars": CHUNK, "delay_seconds": DELAY}},
}
MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=1024, context_window=10**7)
POLICY = ActivityPolicy(heartbeat_seconds=2, initial_interval_seconds=0.2, start_to_close_seconds=60)


# ---------------------------------------------------------------- when the model server wrote each piece


@dataclass
class Written:
    """Per model request (an attempt): when each streamed event was written and the answer's length by then."""

    requests: list[list[tuple[float, int]]] = field(default_factory=list)

    def install(self) -> None:
        original = scripted_server._Handler._send_events
        log = self

        def send_events(handler: Any, answer: Any, *rest: Any) -> None:
            marks: list[tuple[float, int]] = []
            log.requests.append(marks)
            write, chars = handler.wfile.write, 0

            def timed(data: bytes) -> int:
                nonlocal chars
                written = write(data)
                chars += _content_chars(data)
                marks.append((time.time(), chars))
                return written

            handler.wfile.write = timed
            try:
                original(handler, answer, *rest)
            finally:
                handler.wfile.write = write

        scripted_server._Handler._send_events = send_events  # type: ignore[method-assign]

    def written_at(self, upto: int, seen: float, since: int) -> float | None:
        """When the latest attempt (from request ``since`` on) that wrote the first ``upto`` characters before
        ``seen`` wrote them."""
        best = None
        for marks in self.requests[since:]:
            at = next((t for t, n in marks if n >= upto), None)
            if at is not None and at <= seen and (best is None or at > best):
                best = at
        return best


def _content_chars(data: bytes) -> int:
    total = 0
    for line in data.decode(errors="replace").splitlines():
        if not line.startswith("data: {"):
            continue
        try:
            for choice in json.loads(line[6:]).get("choices", []):
                total += len((choice.get("delta") or {}).get("content") or "")
        except ValueError:
            pass
    return total


# ---------------------------------------------------------------- workers


class Workers:
    def __init__(self, address: str, queue: str, base_url: str, state: Path) -> None:
        self.args = (address, queue, base_url, state)
        self.procs: list[subprocess.Popen] = []
        self.replacing: asyncio.Future[subprocess.Popen] | None = None

    def start(self) -> subprocess.Popen:
        proc = start_worker_process(
            WORKER, *self.args, env={"AGENTSTEPS_TEST_STICKY_SECONDS": "1", "AGENTSTEPS_TEST_WARM_OPENAI": "1"}
        )
        self.procs.append(proc)
        return proc

    async def kill_the_one_calling(self, client: Client, sid: str) -> bool:
        """SIGKILL the worker running the session's model call; a fresh one takes its place."""
        described = await client.get_workflow_handle(sid).describe()
        pending = [a for a in described.raw_description.pending_activities if a.last_worker_identity]
        pids = {int(a.last_worker_identity.split("@", 1)[0]) for a in pending}
        victims = [p for p in self.procs if p.pid in pids and p.poll() is None]
        if not victims:
            return False
        for proc in victims:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            self.procs.remove(proc)
        self.replacing = asyncio.get_running_loop().run_in_executor(None, self.start)
        return True

    async def ready(self) -> None:
        """The replacement of the last worker killed polls: the next kill never leaves the queue empty."""
        if self.replacing is not None:
            await self.replacing
            self.replacing = None

    def stop(self) -> None:
        for proc in self.procs:
            kill(proc)


# ---------------------------------------------------------------- part 1: kills and drops


@dataclass
class Reading:
    texts: dict[int, str] = field(default_factory=dict)
    duplicates: int = 0
    gaps: int = 0
    corrected: int = 0
    agrees: bool | None = None
    latencies: list[float] = field(default_factory=list)
    last: int = -1
    disconnects: int = 0

    def take(self, item: StreamItem, written: Written, since: int) -> None:
        self.last = item.position
        if item.kind == "turn_ended":
            self.agrees = item.agrees
        if item.kind != "text" and not item.corrected:
            return
        step = item.step or 0
        held = self.texts.get(step, "")
        if item.at < len(held):
            self.duplicates += len(held) - item.at
        if item.at > len(held):
            self.gaps += item.at - len(held)
        self.corrected += item.corrected
        self.texts[step] = apply(held, item)
        at = written.written_at(len(self.texts[step]), time.time(), since)
        if at is not None and not item.corrected:
            self.latencies.append(time.time() - at)


async def read_turn(
    client: Client, sid: str, after: int, reading: Reading, written: Written, since: int, plan: dict[str, Any]
) -> None:
    """Follow one turn; drop the connection once at ``plan["drop_at"]`` characters and resume after a pause."""
    dropped = False
    while True:
        async with aclosing(follow(client, sid, after=reading.last if reading.last >= 0 else after)) as items:
            async for item in items:
                reading.take(item, written, since)
                if item.kind == "turn_ended":
                    return
                shown = sum(map(len, reading.texts.values()))
                if not dropped and shown >= plan["drop_at"]:
                    dropped = True
                    reading.disconnects += 1
                    break
        await asyncio.sleep(plan["pause"])


async def kills_and_drops(
    client: Client, dropper: Client, workers: Workers, queue: str, turns: int, written: Written, rng: random.Random
) -> dict[str, Any]:
    """``client`` follows each turn live; ``dropper`` (another connection, so its own feed, which it stops when
    it drops and starts again to resume from the session) drops and resumes."""
    sid = f"resume-{uuid.uuid4().hex[:8]}"
    spec = AgentSpec(name="resume", model=MODEL, tools=[], max_steps=2, token_budget=10**9, llm_policy=POLICY)
    config = SessionConfig(stream_tokens=True, continue_after_events=250)
    await client.start_workflow(
        SESSION_WORKFLOW,
        SessionInput(spec=spec, session=config),
        id=sid,
        task_queue=queue,
        task_timeout=timedelta(seconds=2),
    )
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    for n in range(1, turns + 1):
        await workers.ready()
        handle = client.get_workflow_handle(sid)
        start = await handle.query("__temporal_workflow_stream_offset", result_type=int)
        plan: dict[str, Any] = {
            "kill_at": rng.randint(20, len(ANSWER) - 80),
            "drop_at": rng.randint(10, len(ANSWER) - 10),
            "pause": rng.uniform(0.0, 0.4),
            "kill": asyncio.Event(),
        }
        reading = Reading()
        since = len(written.requests)
        started = time.perf_counter()
        turn = asyncio.ensure_future(continue_session(client, sid, f"turn {n}: where is my money?"))
        live = Reading()
        reader = asyncio.ensure_future(read_turn(dropper, sid, start - 1, reading, written, since, plan))
        watcher = asyncio.ensure_future(_read_one_turn(client, sid, start - 1, live, written, since, plan))
        await asyncio.wait([asyncio.ensure_future(plan["kill"].wait()), turn], return_when=asyncio.FIRST_COMPLETED)
        killed = plan["kill"].is_set() and await workers.kill_the_one_calling(client, sid)
        result = await asyncio.wait_for(turn, 120)
        await asyncio.wait_for(reader, 60)
        await asyncio.wait_for(watcher, 60)
        late = Reading()
        async with aclosing(follow(client, sid, after=start - 1)) as items:  # after the turn ended
            async for item in items:
                late.take(item, written, since)
                if item.kind == "turn_ended":
                    break
        answer = reading.texts.get(max(reading.texts, default=0), "")
        rows.append(
            {
                "equal": answer == result.output == ANSWER and live.texts == reading.texts,
                "late_equal": late.texts == reading.texts and late.agrees is True,
                "agrees": reading.agrees is True,
                "duplicates": reading.duplicates,
                "gaps": reading.gaps,
                "corrected": reading.corrected,
                "killed": killed,
                "attempts": len(written.requests) - since,
                "disconnects": reading.disconnects,
                "turn_s": time.perf_counter() - started,
            }
        )
        latencies += live.latencies
        if n % 10 == 0:
            print(
                f"{n} turns: {sum(r['equal'] for r in rows)} equal, {sum(r['killed'] for r in rows)} kills",
                file=sys.stderr,
            )
    state = await client.get_workflow_handle(sid).query("state")
    await close_session(client, sid, "bench done")
    latencies.sort()
    return {
        "turns": turns,
        "transcripts_equal": sum(r["equal"] for r in rows),
        "late_readers_equal": sum(r["late_equal"] for r in rows),
        "agree_events": sum(r["agrees"] for r in rows),
        "duplicates": sum(r["duplicates"] for r in rows),
        "gaps": sum(r["gaps"] for r in rows),
        "corrected_from_answer": sum(r["corrected"] for r in rows),
        "kills": sum(r["killed"] for r in rows),
        "retried_calls": sum(r["attempts"] > 1 for r in rows),
        "disconnects": sum(r["disconnects"] for r in rows),
        "continued_as_new": state["continued"],
        "latency_with_kills_ms_p50": 1000 * _pct(latencies, 0.5),
        "latency_with_kills_ms_p99": 1000 * _pct(latencies, 0.99),
        "turn_s_median": statistics.median(r["turn_s"] for r in rows),
    }


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


# ---------------------------------------------------------------- part 2: beside a turn without streaming


async def beside_plain(client: Client, queue: str, turns: int, written: Written) -> dict[str, float]:
    spec = AgentSpec(name="plain", model=MODEL, tools=[], max_steps=2, token_budget=10**9)
    times: dict[str, list[float]] = {"streamed": [], "plain": []}
    reading = Reading()
    sids = {}
    for mode in times:
        sids[mode] = f"beside-{mode}-{uuid.uuid4().hex[:6]}"
        config = SessionConfig(stream_tokens=mode == "streamed")
        await client.start_workflow(
            SESSION_WORKFLOW, SessionInput(spec=spec, session=config), id=sids[mode], task_queue=queue
        )
    for n in range(turns):
        for mode, sid in sids.items():
            text = f"{mode} turn {n}"
            start = await client.get_workflow_handle(sid).query("__temporal_workflow_stream_offset", result_type=int)
            since = len(written.requests)
            started = time.perf_counter()
            reader = asyncio.ensure_future(_read_one_turn(client, sid, start - 1, reading, written, since))
            result = await continue_session(client, sid, text)
            await asyncio.wait_for(reader, 30)
            times[mode].append(time.perf_counter() - started)
            assert result.output == ANSWER
    for sid in sids.values():
        await close_session(client, sid, "bench done")
    streamed, plain = statistics.median(times["streamed"]), statistics.median(times["plain"])
    latencies = sorted(reading.latencies)
    return {
        "streamed_turn_s": streamed,
        "plain_turn_s": plain,
        "streamed_vs_plain": streamed / plain,
        "latency_ms_p50": 1000 * _pct(latencies, 0.5),
        "latency_ms_p99": 1000 * _pct(latencies, 0.99),
        "latency_samples": len(latencies),
    }


async def _read_one_turn(
    client: Client,
    sid: str,
    after: int,
    reading: Reading,
    written: Written,
    since: int,
    plan: dict[str, Any] | None = None,
) -> None:
    """One turn, never dropping; with a ``plan``, says when the answer shown reached its ``kill_at``."""
    async with aclosing(follow(client, sid, after=after)) as items:
        async for item in items:
            reading.take(item, written, since)
            if (
                plan is not None
                and plan["kill_at"] is not None
                and sum(map(len, reading.texts.values())) >= plan["kill_at"]
            ):
                plan["kill_at"] = None
                plan["kill"].set()
            if item.kind == "turn_ended":
                return


# ---------------------------------------------------------------- part 3: 200 readers


async def approval_round(client: Client, queue: str, readers: int) -> dict[str, float]:
    sid = f"readers-{readers}-{uuid.uuid4().hex[:6]}"
    spec = AgentSpec(name="desk", model=MODEL, tools=["refund_order"], max_steps=4, token_budget=10**9)
    await client.start_workflow(
        SESSION_WORKFLOW,
        SessionInput(spec=spec, session=SessionConfig(stream_tokens=True)),
        id=sid,
        task_queue=queue,
    )
    seen = [0] * readers

    async def read(i: int) -> None:
        async with aclosing(follow(client, sid)) as items:
            async for _ in items:
                seen[i] += 1

    tasks = [asyncio.ensure_future(read(i)) for i in range(readers)]
    await asyncio.sleep(0.5 if readers else 0)
    started = time.perf_counter()
    turn = asyncio.ensure_future(continue_session(client, sid, "please refund A-17"))
    while not (waiting := await pending_approvals(client, sid)):
        await asyncio.sleep(0.02)
    asked = time.perf_counter()
    await decide_approval(client, sid, waiting[0].approval_id, approve=True, approver="bench")
    decided = time.perf_counter()
    result = await turn
    done = time.perf_counter()
    await close_session(client, sid, "bench done")
    closed = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    assert result.output == "Refund issued." and all(n == seen[0] for n in seen)
    return {
        "to_approval_s": asked - started,
        "approve_s": decided - asked,
        "turn_s": done - started,
        "close_s": closed - done,
    }


async def readers_cost(client: Client, queue: str, readers: int, rounds: int) -> dict[str, Any]:
    rows: dict[int, list[dict[str, float]]] = {0: [], 1: [], readers: []}
    for _ in range(rounds):
        for count in rows:
            rows[count].append(await approval_round(client, queue, count))
    med = {count: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for count, rs in rows.items()}
    return {
        "readers": readers,
        "none": med[0],
        "one": med[1],
        "with_readers": med[readers],
        "turn_ratio": med[readers]["turn_s"] / med[0]["turn_s"],
        "approve_ratio": med[readers]["approve_s"] / med[0]["approve_s"],
        "turn_ratio_to_one_reader": med[readers]["turn_s"] / med[1]["turn_s"],
        "approve_ratio_to_one_reader": med[readers]["approve_s"] / med[1]["approve_s"],
        "feeds_left": feeds_open(),
    }


# ---------------------------------------------------------------- main


async def main(turns: int, readers: int, rounds: int, plain: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    written = Written()
    written.install()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    queue = f"resume-{uuid.uuid4().hex[:6]}"
    try:
        with tempfile.TemporaryDirectory() as state, ScriptedModelServer(SCRIPT) as scripted:
            address = env.client.service_client.config.target_host
            workers = Workers(address, queue, scripted.url_openai, Path(state))
            try:
                await asyncio.gather(*(asyncio.to_thread(workers.start) for _ in range(2)))
                dropper = await Client.connect(address, data_converter=pydantic_data_converter)
                summary: dict[str, Any] = {
                    "kills_and_drops": await kills_and_drops(env.client, dropper, workers, queue, turns, written, rng)
                }
                if plain:
                    summary["beside_plain"] = await beside_plain(env.client, queue, plain, written)
                if rounds:
                    summary["readers_cost"] = await readers_cost(env.client, queue, readers, rounds)
            finally:
                workers.stop()
    finally:
        await env.shutdown()
    k = summary["kills_and_drops"]
    print(
        f"{k['turns']} turns, {k['kills']} SIGKILLs, {k['disconnects']} reader drops, "
        f"{k['continued_as_new']} continue-as-new: transcripts equal {k['transcripts_equal']}/{k['turns']}, "
        f"late readers {k['late_readers_equal']}/{k['turns']}, duplicates {k['duplicates']}, gaps {k['gaps']}"
    )
    print(
        f"latency model -> reader through the kills: p50 {k['latency_with_kills_ms_p50']:.0f} ms, "
        f"p99 {k['latency_with_kills_ms_p99']:.0f} ms"
    )
    if "beside_plain" in summary:
        b = summary["beside_plain"]
        print(
            f"latency model -> reader: p50 {b['latency_ms_p50']:.0f} ms, p99 {b['latency_ms_p99']:.0f} ms; "
            f"turn wall time: streamed {b['streamed_turn_s']:.2f} s, plain {b['plain_turn_s']:.2f} s"
        )
    if "readers_cost" in summary:
        r = summary["readers_cost"]
        print(
            f"{r['readers']} readers: turn {r['turn_ratio']:.2f}x, approve {r['approve_ratio']:.2f}x of the same "
            f"with none; {r['turn_ratio_to_one_reader']:.2f}x, {r['approve_ratio_to_one_reader']:.2f}x with one"
        )
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--readers", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--plain", type=int, default=5)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    result = asyncio.run(main(args.turns, args.readers, args.rounds, args.plain, args.seed))
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # temporalio issue #300: a process that used a client can abort at interpreter exit
