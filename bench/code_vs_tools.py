"""One task three ways: tool calling with whole results, tool calling with cut results, code mode.

The task: list N tickets, keep the stalled ones, sort them by due date, return
the first 10 ids. The scripted model replays a correct run of each mode: in
tool mode it calls ``tickets.list`` and then answers with the ids; in code
mode it answers once with a program. Tool calling is measured as the
frameworks do it (``tools_whole``: every result whole) and as the engine's
tool mode sends it by default (``tools_cut``: results cut at
``tool_result_chars``). Since the scripted model answers right whatever it was
sent, each tool-mode answer is checked against what the model received: the
answer a perfect reader of that tool message could give
(``answer_correct``, ``tickets_the_model_could_read``). Tokens are counted
with one tokenizer (o200k_base, ``contracts.llm.tokens``) over the request bodies
the model server received and the replies it sent, at N = 50, 500 and 5,000.

Then code mode's overhead per tool call against a tool activity started
straight from a workflow: K sequential calls (each one a ``tools.call``, which
resumes the program it carries) and K gathered calls (one resume for all), both measured as
(time(K) - time(0)) / K so the model call, check and start cancel out. A third
side runs the same direct calls plus one no-op local activity per pause: what
a local-activity segment costs before any interpreter work (the floor of this
design). CPU per call is reported by process (this process, which hosts the
workers; the Monty interpreter processes; the dev server). ``--capped`` keeps
the dev server's default transfer-task poll cap (every dispatch waits for a
~50 ms poll), as the figures before 2026-11-30 were measured.

Then the replay of a finished program (20 and 100 calls) in a fresh worker, each side under the runner it
ships with (``replay_costs``), and the payload-store writes per program, local and S3 (moto).

One dev server, one worker, everything interleaved. The last line is one JSON
object with the figures and the target checks.

    .venv/bin/python bench/code_vs_tools.py [--sizes 50,500,5000] [--rounds 3] [--calls 20] [--capped]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from cpu import child_pids, cpu_seconds, temporal_server_pids
from direct_tools_workflow import DirectToolCalls, noop_segment
from pydantic import BaseModel
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.llm.tokens import TOKENS_PER_MESSAGE, count_text_tokens
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.worker import ENGINE_SANDBOX, build_data_converter, connect, running_worker
from agentsteps.worker import workflows as engine_workflows

MODEL = "scripted-2026-01-01"
CONTEXT_WINDOW = 1_000_000  # the largest windows on offer today
BODY = "Customer reports the export hangs at 90%; logs attached, retried twice, no workaround yet. " * 12


class ListArgs(BaseModel):
    count: int


class Ticket(BaseModel):
    id: int
    title: str
    assignee: str
    status: str
    stalled: bool
    due: str
    body: str


class TicketList(BaseModel):
    tickets: list[Ticket]


class PingArgs(BaseModel):
    i: int


class Pong(BaseModel):
    i: int


def tickets(count: int) -> list[Ticket]:
    return [
        Ticket(
            id=i,
            title=f"Export hangs for customer {i}",
            assignee=f"user{i % 17}",
            status="in_progress" if i % 3 else "blocked",
            stalled=i % 3 == 0,
            due=f"2026-{1 + (i * 7) % 12:02d}-{1 + (i * 13) % 28:02d}",
            body=BODY,
        )
        for i in range(1, count + 1)
    ]


def expected_ids(count: int) -> list[int]:
    stalled = sorted((t for t in tickets(count) if t.stalled), key=lambda t: (t.due, t.id))
    return [t.id for t in stalled[:10]]


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(name="tickets.list")
    def list_tickets(args: ListArgs) -> TicketList:
        """List the newest ``count`` tickets with every field."""
        return TicketList(tickets=tickets(args.count))

    @reg.tool(name="ping")
    def ping(args: PingArgs) -> Pong:
        """Answer at once."""
        return Pong(i=args.i)

    @reg.tool(name="guarded", requires_approval=True)
    def guarded(args: PingArgs) -> Pong:
        """Answer once a person approves."""
        return Pong(i=args.i)

    return reg


def task(count: int) -> str:
    return f"List the newest {count} tickets, keep the stalled ones, sort them by due date, give the first 10 ids."


PROGRAM = """\
r = await tickets_list(count={count})
stalled = [t for t in r["tickets"] if t["stalled"]]
stalled.sort(key=lambda t: (t["due"], t["id"]))
[t["id"] for t in stalled[:10]]
"""


def fenced(program: str) -> dict[str, Any]:
    return {"content": f"```python\n{program}```"}


def tools_script(count: int) -> dict[str, Any]:
    return {
        "replies": [
            {"tool_calls": [{"name": "tickets.list", "arguments": {"count": count}}]},
            {"content": json.dumps(expected_ids(count))},
        ]
    }


MODES = ("tools_whole", "tools_cut", "code")
"""Tool calling as the frameworks do it (every result whole), tool calling with results cut at the
default ``tool_result_chars`` (what the engine's tool mode sends), and code mode."""


def spec(mode: str, tools: list[str]) -> AgentSpec:
    whole = {"tool_result_chars": 10**12} if mode == "tools_whole" else {}
    return AgentSpec(
        name=f"bench-{mode}",
        model=LLMConfig(model=MODEL, max_tokens=1024, context_window=CONTEXT_WINDOW),
        tools=tools,
        mode="code" if mode == "code" else "tools",
        max_steps=3,
        reprompt_budget=0,  # type: ignore[arg-type]
        token_budget=100_000_000,
        **whole,
    )


_TICKET = re.compile(r'\{"id": (\d+), [^{}]*?"stalled": (true|false), "due": "([0-9-]+)"')


def answerable_ids(seen: str) -> tuple[list[int], int]:
    """The answer a perfect reader of ``seen`` (the tool result as the model received it) would give,
    and how many tickets it could read there: only tickets shown whole count."""
    found = [(int(i), stalled == "true", due) for i, stalled, due in _TICKET.findall(seen)]
    stalled = sorted(((due, i) for i, is_stalled, due in found if is_stalled))
    return [i for _, i in stalled[:10]], len(found)


# ----------------------------------------------------------------- tokens


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def request_tokens(body: dict[str, Any]) -> int:
    total = 0
    for message in body.get("messages", []):
        total += TOKENS_PER_MESSAGE + count_text_tokens(_text(message.get("content") or ""))
        if message.get("tool_calls"):
            total += count_text_tokens(_text(message["tool_calls"]))
    for key in ("tools", "response_format"):
        if body.get(key):
            total += count_text_tokens(_text(body[key]))
    return total


def reply_tokens(reply: dict[str, Any]) -> int:
    calls = "".join(c["name"] + json.dumps(c["arguments"]) for c in reply.get("tool_calls", []))
    return count_text_tokens(reply.get("content") or "") + count_text_tokens(calls)


# ----------------------------------------------------------------- runs


async def run_agent(
    client: Client, queue: str, agent: AgentSpec, text: str
) -> tuple[AgentResult | None, str | None, float]:
    started = time.perf_counter()
    try:
        result = await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=agent, input=text),
            id=f"bench-{uuid.uuid4().hex[:10]}",
            task_queue=queue,
            result_type=AgentResult,
        )
    except WorkflowFailureError as exc:
        cause = exc.cause
        while cause is not None and not isinstance(cause, ApplicationError):
            cause = cause.__cause__
        return None, str(cause or exc), time.perf_counter() - started
    return result, None, time.perf_counter() - started


async def task_in_mode(
    client: Client, queue: str, scripted: ScriptedModelServer, mode: str, count: int, rounds: int
) -> dict[str, Any]:
    """Tokens and wall time of the task in ``mode``, and whether its answer is right.

    The scripted model always answers with the right ids; in tool mode that is honest only when the
    result it was sent holds them, so ``answer_correct`` is the answer a perfect reader of what the
    model received would give, compared with the right one (code mode: the program's own output)."""
    script = {"replies": [fenced(PROGRAM.format(count=count))]} if mode == "code" else tools_script(count)
    agent = spec(mode, ["tickets.list"])
    correct: bool | None = None
    readable: int | None = None
    times: list[float] = []
    sent = received = None
    for _ in range(rounds):
        scripted.set_script(script)
        result, error, elapsed = await run_agent(client, queue, agent, task(count))
        if error is not None:
            # A real finding, not a number: the tool result does not fit the model.
            kind = re.search(r"\[(\w+)\] at", error)
            refused = re.search(r"the prompt is about (\d+) tokens", error)
            return {
                "n": count,
                "tokens": None,
                "sent": None,
                "received": None,
                "wall_s": round(elapsed, 3),
                "answer_correct": False,
                "error": kind.group(1) if kind else error[:300],
                "requests_sent": len(scripted.requests),
                "refused_prompt_tokens": int(refused.group(1)) if refused else None,
            }
        assert result is not None
        output = result.output if mode == "code" else json.loads(result.output)
        assert output == expected_ids(count), (mode, count, output)
        times.append(elapsed)
        bodies = [r.body for r in scripted.requests]
        if mode == "code":
            correct, readable = True, count
        else:
            seen = "".join(m.get("content") or "" for m in bodies[-1]["messages"] if m.get("role") == "tool")
            answer, readable = answerable_ids(seen)
            correct = answer == expected_ids(count)
        sent = sum(request_tokens(b) for b in bodies)
        received = sum(reply_tokens(r) for r in script["replies"][: len(bodies)])
    assert sent is not None and received is not None
    return {
        "n": count,
        "tokens": sent + received,
        "sent": sent,
        "received": received,
        "wall_s": round(statistics.median(times), 3),
        "error": None,
        "answer_correct": correct,
        "tickets_the_model_could_read": readable,
    }


PROCESSES = ("worker", "sandbox", "server")
"""CPU by process: this one (the workers, the scripted model's thread), the Monty interpreter
processes it started, the dev server."""


def _cpu() -> dict[str, float]:
    children = child_pids(os.getpid())
    servers = set(temporal_server_pids())
    return {
        "worker": time.process_time(),
        "sandbox": sum(_threads_cpu(p) for p in children if p not in servers),
        "server": sum(_threads_cpu(p) for p in servers),
    }


def _threads_cpu(pid: int) -> float:
    """CPU seconds of a process's live threads from schedstat (nanoseconds), finer than
    /proc/<pid>/stat's 10 ms ticks, which round a Monty process's share of one call to zero."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return cpu_seconds(pid)
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9


def _spent(before: dict[str, float]) -> dict[str, float]:
    after = _cpu()
    return {proc: after[proc] - before[proc] for proc in PROCESSES}


async def per_call(
    client: Client, queue: str, direct_queue: str, scripted: ScriptedModelServer, calls: int, rounds: int
) -> dict[str, Any]:
    programs = {
        "sequential": (f"for i in range({calls}):\n    await ping(i)\n{calls}\n", "0\n"),
        "gathered": (f"import asyncio\nlen(await asyncio.gather(*[ping(i) for i in range({calls})]))\n", "0\n"),
    }
    agent = spec("code", ["ping"])
    figures: dict[str, Any] = {}
    for shape, (program, empty) in programs.items():
        code_samples: list[float] = []
        direct_samples: list[float] = []
        floor_samples: list[float] = []
        cpu_samples: dict[str, dict[str, list[float]]] = {
            side: {proc: [] for proc in PROCESSES} for side in ("code", "direct", "floor")
        }
        for round_ in range(rounds + 1):  # round 0 warms both paths up
            timed: dict[str, float] = {}
            used: dict[str, dict[str, float]] = {}
            for label, source in (("k", program), ("zero", empty)):
                scripted.set_script({"replies": [fenced(source)]})
                before = _cpu()
                result, error, elapsed = await run_agent(client, queue, agent, "ping")
                assert result is not None and error is None, error
                timed[label], used[label] = elapsed, _spent(before)
            for label, k, segment in (
                ("dk", calls, False),
                ("dzero", 0, False),
                ("fk", calls, True),
                ("fzero", 0, True),
            ):
                started, before = time.perf_counter(), _cpu()
                await client.execute_workflow(
                    DirectToolCalls.run,
                    args=[k, shape == "gathered", segment],
                    id=f"direct-{uuid.uuid4().hex[:10]}",
                    task_queue=direct_queue,
                )
                timed[label], used[label] = time.perf_counter() - started, _spent(before)
            if round_:
                code_samples.append((timed["k"] - timed["zero"]) / calls)
                direct_samples.append((timed["dk"] - timed["dzero"]) / calls)
                floor_samples.append((timed["fk"] - timed["fzero"]) / calls)
                for side, (k, zero) in {
                    "code": ("k", "zero"),
                    "direct": ("dk", "dzero"),
                    "floor": ("fk", "fzero"),
                }.items():
                    for proc in used[k]:
                        cpu_samples[side][proc].append((used[k][proc] - used[zero][proc]) / calls)
            print(
                f"{shape} x{calls} round {round_}: code {1000 * (timed['k'] - timed['zero']) / calls:.1f} ms/call, "
                f"direct {1000 * (timed['dk'] - timed['dzero']) / calls:.1f} ms/call, "
                f"direct + no-op local activity {1000 * (timed['fk'] - timed['fzero']) / calls:.1f} ms/call",
                file=sys.stderr,
                flush=True,
            )
        code, direct = statistics.median(code_samples), statistics.median(direct_samples)
        floor = statistics.median(floor_samples)
        figures[shape] = {
            "code_ms_per_call": round(code * 1000, 2),
            "direct_ms_per_call": round(direct * 1000, 2),
            "ratio": round(code / direct, 3) if direct > 0 else None,
            # The same calls plus one no-op local activity per pause: what the
            # local-activity segment alone costs, before any interpreter work.
            "local_activity_floor_ms_per_call": round(floor * 1000, 2),
            "floor_ratio": round(floor / direct, 3) if direct > 0 else None,
            "cpu_ms_per_call": {
                side: {proc: round(statistics.median(v) * 1000, 2) for proc, v in by_proc.items()}
                for side, by_proc in cpu_samples.items()
            },
        }
    return figures


async def replay_costs(
    client: Client,
    queue: str,
    direct_queue: str,
    scripted: ScriptedModelServer,
    settings: WorkerSettings,
    calls: int,
    rounds: int,
) -> dict[str, Any]:
    """Replaying a finished ``calls``-call program in a fresh worker (a new ``Replayer``, so nothing cached)
    against replaying the direct loop's run of the same calls: what a worker restart costs each.

    Each side replays in the worker it ships in: the engine under its own runner (``ENGINE_SANDBOX``, what
    ``agentsteps worker`` and ``agentsteps replay --check`` run: its modules passed through the sandbox,
    payload contexts read without a round trip into it), the direct loop under the SDK's default sandbox
    (a team's ``Worker``). Before 2026-12-06 (branch ``replay``) the engine was replayed under the default
    sandbox too, a worker nobody runs: every payload's contexts asked through the sandbox and the engine's
    modules imported afresh. ``same_runner``: the direct loop under the engine's runner as well, the
    stricter like-for-like. Wall and CPU (this process, all threads) per replay, medians."""
    scripted.set_script({"replies": [fenced(f"for i in range({calls}):\n    await ping(i)\n{calls}\n")]})
    code_id, direct_id = f"replay-code-{uuid.uuid4().hex[:8]}", f"replay-direct-{uuid.uuid4().hex[:8]}"
    await client.execute_workflow(
        AGENT_WORKFLOW, AgentInput(spec=spec("code", ["ping"]), input="ping"), id=code_id, task_queue=queue
    )
    await client.execute_workflow(
        DirectToolCalls.run, args=[calls, False, False], id=direct_id, task_queue=direct_queue
    )
    code_history = await client.get_workflow_handle(code_id).fetch_history()
    direct_history = await client.get_workflow_handle(direct_id).fetch_history()
    converter = build_data_converter(settings)
    sides: dict[str, tuple[Any, list[type], dict[str, Any]]] = {
        "code": (code_history, engine_workflows(), {"workflow_runner": ENGINE_SANDBOX}),
        "direct": (direct_history, [DirectToolCalls], {}),
        "direct_same_runner": (direct_history, [DirectToolCalls], {"workflow_runner": ENGINE_SANDBOX}),
    }
    wall: dict[str, list[float]] = {side: [] for side in sides}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    for round_ in range(max(rounds, 7) + 1):
        for side, (history, registered, runner) in sides.items():
            started, used = time.perf_counter(), time.process_time()
            await Replayer(workflows=registered, data_converter=converter, **runner).replay_workflow(history)
            if round_:
                wall[side].append(time.perf_counter() - started)
                cpu[side].append(time.process_time() - used)
    ms = {side: round(statistics.median(v) * 1000, 1) for side, v in wall.items()}
    cpu_ms = {side: round(statistics.median(v) * 1000, 1) for side, v in cpu.items()}
    figure = {
        "calls": calls,
        "code_ms": ms["code"],
        "direct_ms": ms["direct"],
        "direct_same_runner_ms": ms["direct_same_runner"],
        "ratio": round(ms["code"] / ms["direct"], 3),
        "ratio_same_runner": round(ms["code"] / ms["direct_same_runner"], 3),
        "cpu_ms": cpu_ms,
        "cpu_ratio": round(cpu_ms["code"] / cpu_ms["direct"], 3),
        "cpu_ratio_same_runner": round(cpu_ms["code"] / cpu_ms["direct_same_runner"], 3),
        "history_events": {"code": len(code_history.events), "direct": len(direct_history.events)},
    }
    print(f"replay of a finished {calls}-call run: {figure}", file=sys.stderr, flush=True)
    return figure


async def store_writes(
    client: Client, scripted: ScriptedModelServer, settings: WorkerSettings, reg: ToolRegistry, calls: int
) -> dict[str, Any]:
    """Payload-store writes per program, with the local store and with S3 (moto on loopback): a
    ``calls``-call program (no long wait), and a one-call program whose call waits for an approval.
    ``snapshots`` counts the worker's snapshot writes; ``objects`` every new object in the store (the
    run's conversation segments too)."""
    from moto.server import ThreadedMotoServer

    from agentsteps.activities.sandbox.snapshots import SnapshotVault
    from agentsteps.client.sessions import decide_approval, pending_approvals

    saves = 0
    save = SnapshotVault.save

    async def counted(self: SnapshotVault, run_key: str, data: bytes) -> Any:
        nonlocal saves
        saves += 1
        return await save(self, run_key, data)

    SnapshotVault.save = counted  # type: ignore[method-assign]
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing-secret",
    )
    s3.create_bucket(Bucket="bench-payloads")
    s3_store = {
        "s3_bucket": "bench-payloads",
        "s3_endpoint_url": endpoint,
        "s3_region": "us-east-1",
        "s3_access_key_id": "testing",
        "s3_secret_access_key": "testing-secret",
    }

    def objects(kind: str, state: Path) -> int:
        if kind == "s3":
            return int(s3.list_objects_v2(Bucket="bench-payloads").get("KeyCount", 0))
        return sum(1 for p in (state / "payloads").rglob("*") if p.is_file())

    figures: dict[str, Any] = {}
    address = client.service_client.config.target_host
    try:
        for kind in ("local", "s3"):
            with tempfile.TemporaryDirectory() as state:
                worker_settings = WorkerSettings(
                    state_dir=Path(state),
                    task_queue=f"{settings.task_queue}-{kind}",
                    tool_factories=[],
                    snapshot_key="bench-snapshot-key-0123456789abcdef",
                    providers=settings.providers,
                    payload_store=s3_store if kind == "s3" else {},
                )
                engine = await connect(worker_settings, address)
                async with running_worker(engine, worker_settings, registry=reg):
                    row: dict[str, Any] = {}
                    for shape, program, tools in (
                        ("calls", f"for i in range({calls}):\n    await ping(i)\n{calls}\n", ["ping"]),
                        ("approval", "(await guarded(1))['i']\n", ["guarded"]),
                    ):
                        scripted.set_script({"default": fenced(program)})
                        before, saves = objects(kind, Path(state)), 0
                        handle = await engine.start_workflow(
                            AGENT_WORKFLOW,
                            AgentInput(spec=spec("code", tools), input="go"),
                            id=f"writes-{uuid.uuid4().hex[:8]}",
                            task_queue=worker_settings.task_queue,
                        )
                        if shape == "approval":
                            for _ in range(400):
                                found = await pending_approvals(engine, handle.id)
                                if found:
                                    break
                                await asyncio.sleep(0.05)
                            await decide_approval(
                                engine, handle.id, found[0].approval_id, approve=True, approver="bench"
                            )
                        await handle.result()
                        row[shape] = {"snapshots": saves, "objects": objects(kind, Path(state)) - before}
                    figures[kind] = row
                print(f"store writes per program ({kind}): {figures[kind]}", file=sys.stderr, flush=True)
    finally:
        SnapshotVault.save = save  # type: ignore[method-assign]
        moto.stop()
    return figures


async def main(sizes: list[int], rounds: int, calls: int, capped: bool = False) -> dict[str, Any]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=_capped_args() if capped else dev_server_args(),
    )
    address = env.client.service_client.config.target_host
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as state, ScriptedModelServer({"rules": []}) as scripted:
        settings = WorkerSettings(
            state_dir=Path(state),
            task_queue=f"bench-{uuid.uuid4().hex[:6]}",
            tool_factories=[],
            snapshot_key="bench-snapshot-key-0123456789abcdef",
            providers=ProviderSettings(openai_base_url=scripted.url_openai, request_timeout_seconds=120),
        )
        client = await Client.connect(address, data_converter=build_data_converter(settings))
        reg = registry()
        direct_queue = settings.task_queue + "-direct"
        direct = Worker(
            client,
            task_queue=direct_queue,
            workflows=[DirectToolCalls],
            activities=[ToolActivities(reg).call, noop_segment],
        )
        # The engine's worker has a client of its own, as agentsteps worker builds it; the direct side the team's.
        engine = await connect(settings, address)
        async with running_worker(engine, settings, registry=reg), direct:
            for count in sizes:
                for mode in MODES:
                    figure = await task_in_mode(client, settings.task_queue, scripted, mode, count, rounds)
                    results[mode].append(figure)
                    print(f"{mode} N={count}: {figure}", file=sys.stderr, flush=True)
            overhead = {
                n: await per_call(client, settings.task_queue, direct_queue, scripted, n, rounds)
                for n in sorted({calls, 100})
            }
            replay = {
                n: await replay_costs(client, settings.task_queue, direct_queue, scripted, settings, n, rounds)
                for n in sorted({calls, 100})
            }
        writes = await store_writes(client, scripted, settings, reg, 100)
    await env.shutdown()
    summary = summarise(results, overhead, rounds, calls, replay, writes)
    summary["server"] = "dev server, default transfer-task poll cap" if capped else "dev server, poll cap lifted"
    return summary


def _capped_args() -> list[str]:
    """The embedded server's arguments without the lifted transfer-task poll cap (search attributes kept)."""
    args = dev_server_args()
    return [
        a
        for i, a in enumerate(args)
        if "transferProcessor" not in a and not (a == "--dynamic-config-value" and "transferProcessor" in args[i + 1])
    ]


def summarise(
    results: dict[str, list[dict[str, Any]]],
    overhead: dict[int, dict[str, Any]],
    rounds: int,
    calls: int,
    replay: dict[int, dict[str, Any]] | None = None,
    writes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    by = {mode: {f["n"]: f for f in figures} for mode, figures in results.items()}
    code_500 = by["code"].get(500, {}).get("tokens")
    savings = {}
    for mode in ("tools_whole", "tools_cut"):
        tools_500 = by[mode].get(500, {}).get("tokens")
        savings[mode] = round(1 - code_500 / tools_500, 5) if tools_500 and code_500 else None
    saving = savings["tools_whole"]  # the honest comparison: the frameworks send results whole
    code_50, code_5000 = by["code"].get(50, {}).get("tokens"), by["code"].get(5000, {}).get("tokens")
    growth = code_5000 / code_50 - 1 if code_50 and code_5000 else None
    sequential = {n: o["sequential"]["ratio"] for n, o in overhead.items()}
    gathered = {n: o["gathered"]["ratio"] for n, o in overhead.items()}
    snapshots = [row[shape]["snapshots"] for row in (writes or {}).values() for shape in row]
    return {
        "tokenizer": "o200k_base",
        "context_window": CONTEXT_WINDOW,
        **results,
        "answers_correct": {mode: [f.get("answer_correct") for f in figures] for mode, figures in results.items()},
        "per_call_overhead": overhead,
        "replay_of_finished_program": replay,
        "store_writes_per_program": writes,
        "rounds": rounds,
        "calls_per_run": calls,
        "token_saving_at_500": saving,
        "token_saving_at_500_by_tool_mode": savings,
        "code_token_growth_50_to_5000": round(growth, 5) if growth is not None else None,
        "targets": {
            "saving_at_500_ge_0.99": saving is not None and saving >= 0.99,
            "code_growth_le_0.05": growth is not None and growth <= 0.05,
            "sequential_le_1.2x": {n: r is not None and r <= 1.2 for n, r in sequential.items()},
            "gathered_le_1.1x": {n: r is not None and r <= 1.1 for n, r in gathered.items()},
            "replay_le_1.5x": bool(replay) and replay[max(replay)]["ratio"] <= 1.5,
            "snapshots_le_1_per_long_wait": bool(writes)
            and all(row["calls"]["snapshots"] == 0 and row["approval"]["snapshots"] <= 1 for row in writes.values()),
        },
        "snapshot_writes": snapshots,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="50,500,5000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument(
        "--capped",
        action="store_true",
        help="keep the dev server's default transfer-task poll cap (every dispatch waits ~50 ms)",
    )
    args = parser.parse_args()
    summary = asyncio.run(main([int(s) for s in args.sizes.split(",")], args.rounds, args.calls, args.capped))
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
