"""The sandbox activities against real Monty: check, start, pause, resume, limits, tampering."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError

from agentsteps.activities.sandbox import SandboxActivities, SandboxPool, SnapshotVault, load_snapshot_key
from agentsteps.contracts import ToolSchema
from agentsteps.contracts.code.program import (
    CallOutcome,
    CheckProgramInput,
    ProgramLimits,
    ResumeProgramInput,
    StartProgramInput,
)
from agentsteps.contracts.code.stubs import generate_stubs, program_functions
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.violations import ViolationKind
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

TOOLS = [
    ToolSchema(
        name="tickets.list",
        parameters={"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]},
        output_schema={
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "due": {"type": "string"}},
                "required": ["id", "due"],
            },
        },
    ),
    ToolSchema(
        name="tickets.close",
        parameters={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        output_schema={"type": "object", "properties": {"closed": {"type": "integer"}}, "required": ["closed"]},
        side_effects=True,
    ),
]
FUNCTIONS = program_functions(TOOLS)
STUBS = generate_stubs(TOOLS)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest_asyncio.fixture(scope="module")
async def pool():
    p = SandboxPool(max_processes=2)
    yield p
    await p.close()


@pytest.fixture
def store(tmp_path: Path) -> PayloadStore:
    return PayloadStore(LocalDirStorageDriver(tmp_path / "payloads"))


@pytest.fixture
def acts(pool: SandboxPool, store: PayloadStore) -> SandboxActivities:
    return SandboxActivities(pool, SnapshotVault(store, b"k" * 32))


def _start(program: str, limits: ProgramLimits | None = None) -> StartProgramInput:
    return StartProgramInput(
        run_key="run-1",
        program=program,
        functions=FUNCTIONS,
        limits=limits or ProgramLimits(),
        now=NOW.isoformat(),
        seed=42,
    )


async def _run(acts: SandboxActivities, program: str, tools: dict, limits: ProgramLimits | None = None):
    """Play the workflow's part in-process: answer every pending call, resume until done."""
    limits = limits or ProgramLimits()
    status = await acts.start(_start(program, limits))
    batches = []
    outcomes: dict[int, CallOutcome] = {}
    while status.state == "pending":
        batches.append([c.function for c in status.calls])
        for call in status.calls:
            try:
                outcomes[call.call_id] = CallOutcome(
                    call_id=call.call_id, value=tools[call.function](**json.loads(call.arguments))
                )
            except Exception as exc:  # noqa: BLE001 - the program should see any tool failure
                outcomes[call.call_id] = CallOutcome(call_id=call.call_id, error=str(exc))
        status = await acts.resume(
            ResumeProgramInput(
                run_key="run-1",
                snapshot=status.snapshot,
                functions=FUNCTIONS,
                outcomes=[outcomes[i] for i in status.awaiting],
                limits=limits,
                output=status.output,
                output_dropped=status.output_dropped,
                calls_made=status.calls_made,
                sandbox_seconds=status.sandbox_seconds,
            )
        )
    return status, batches


async def test_check_accepts_a_well_typed_program(acts):
    program = 'ts = await tickets_list("open")\nsorted(t["id"] for t in ts)\n'
    result = await acts.check(CheckProgramInput(program=program, stubs=STUBS))
    assert result.violations == []


async def test_check_reports_type_errors_at_program_lines(acts):
    program = 'ts = await tickets_list(3)\nx = ts[0]["nope"]\n'
    result = await acts.check(CheckProgramInput(program=program, stubs=STUBS))
    kinds = {v.kind for v in result.violations}
    assert kinds == {ViolationKind.program_type}
    paths = sorted(v.path for v in result.violations)
    assert paths[0].startswith("$.program:1:") and paths[1].startswith("$.program:2:")
    assert any("nope" in v.message for v in result.violations)


async def test_check_reports_syntax_errors_and_runs_nothing(acts, pool):
    result = await acts.check(CheckProgramInput(program="x = = 1\n", stubs=STUBS))
    assert [v.kind for v in result.violations] == [ViolationKind.program_syntax]
    assert result.violations[0].path.startswith("$.program:1:")


async def test_program_lists_filters_and_closes_each_item(acts):
    closed = []
    tools = {
        "tickets_list": lambda status: [{"id": i, "due": f"2026-01-{i:02d}"} for i in (5, 3, 9, 1)],
        "tickets_close": lambda id: closed.append(id) or {"closed": id},
    }
    program = (
        "import asyncio\n"
        'ts = await tickets_list("open")\n'
        'late = sorted([t for t in ts if t["id"] > 2], key=lambda t: t["due"])\n'
        'print("closing", len(late))\n'
        'rs = await asyncio.gather(*[tickets_close(t["id"]) for t in late])\n'
        '[r["closed"] for r in rs]\n'
    )
    status, batches = await _run(acts, program, tools)
    assert status.state == "completed", status.error
    assert status.value == [3, 5, 9]
    assert sorted(closed) == [3, 5, 9]
    # One pause for the list, one pause with all three gathered closes.
    assert batches == [["tickets_list"], ["tickets_close"] * 3]
    assert status.output == "closing 3\n"
    assert status.calls_made == 4


async def test_tool_error_is_raised_inside_the_program(acts):
    def failing(status):
        raise ValueError("tracker is down")

    program = 'try:\n    await tickets_list("open")\n    r = "no"\nexcept RuntimeError as e:\n    r = str(e)\nr\n'
    status, _ = await _run(acts, program, {"tickets_list": failing})
    assert status.state == "completed"
    assert "tracker is down" in status.value


async def test_clock_is_frozen_and_random_is_seeded(acts):
    program = "import random, datetime, time\n[str(datetime.datetime.now()), time.time(), random.random()]\n"
    first = await acts.start(_start(program))
    second = await acts.start(_start(program))
    assert first.value[0].startswith("2026-03-01 12:00:00")
    assert first.value[1] == NOW.timestamp()
    assert first.value == second.value


@pytest.mark.parametrize(
    ("program", "kind", "text"),
    [
        ("while True:\n    pass\n", "timeout", "TimeoutError"),
        ('x = []\nwhile True:\n    x.append("a" * 1000000)\n', "memory", "MemoryError"),
        ("def f(n):\n    return f(n + 1)\nf(0)\n", "recursion", "RecursionError"),
        ("import os\nos.getenv('HOME')\n", "exception", "PermissionError"),
        ("import os\nos.environ['HOME']\n", "exception", "PermissionError"),
        ("import subprocess\n", "exception", "ModuleNotFoundError"),
        ("import socket\n", "exception", "ModuleNotFoundError"),
        ("open('/etc/passwd').read()\n", "exception", "PermissionError"),
        ("class A:\n    pass\nA()\n", "not_serializable", "return only"),
        ("{1, 2}\n", "not_serializable", "set"),
        ("x = = 1\n", "syntax", ""),
    ],
)
async def test_hostile_program_fails_with_a_typed_error(acts, program, kind, text):
    limits = ProgramLimits(segment_seconds=1.0, memory_bytes=32 * 1024 * 1024)
    status = await acts.start(_start(program, limits))
    assert status.state == "failed"
    assert status.error.kind == kind, status.error
    assert text in status.error.message


async def test_huge_output_is_capped_with_a_notice(acts):
    status = await acts.start(_start('for i in range(10000):\n    print("x" * 100)\n"done"\n'))
    assert status.state == "completed" and status.value == "done"
    assert len(status.output) == 4096
    assert status.output_dropped == 10000 * 101 - 4096


async def test_too_many_tool_calls_stop_the_program(acts):
    program = "import asyncio\nawait asyncio.gather(*[tickets_close(i) for i in range(100000)])\n"
    status = await acts.start(_start(program, ProgramLimits(max_tool_calls=50)))
    assert status.state == "failed" and status.error.kind == "tool_call_limit"


async def test_snapshot_is_content_addressed_and_resumes_on_a_fresh_session(acts, store):
    status = await acts.start(_start('ts = await tickets_list("open")\nlen(ts)\n'))
    assert status.state == "pending" and status.awaiting == [0]
    ref = status.snapshot
    path = store.driver.path_for(ref.claim["hash_value"])
    assert path.exists()
    done = await acts.resume(
        ResumeProgramInput(
            run_key="run-1",
            snapshot=ref,
            functions=FUNCTIONS,
            outcomes=[CallOutcome(call_id=0, value=[{"id": 1, "due": "x"}] * 7)],
        )
    )
    assert done.state == "completed" and done.value == 7


async def test_tampered_snapshot_is_refused_with_a_non_retryable_error(acts, store):
    status = await acts.start(_start('ts = await tickets_list("open")\nlen(ts)\n'))
    path = store.driver.path_for(status.snapshot.claim["hash_value"])
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    resume = ResumeProgramInput(
        run_key="run-1", snapshot=status.snapshot, functions=FUNCTIONS, outcomes=[CallOutcome(call_id=0, value=[])]
    )
    with pytest.raises(ApplicationError) as info:
        await acts.resume(resume)
    assert info.value.type == "SnapshotIntegrityError" and info.value.non_retryable


async def test_snapshot_signed_for_another_run_is_refused(acts):
    status = await acts.start(_start('ts = await tickets_list("open")\nlen(ts)\n'))
    resume = ResumeProgramInput(
        run_key="run-2", snapshot=status.snapshot, functions=FUNCTIONS, outcomes=[CallOutcome(call_id=0, value=[])]
    )
    with pytest.raises(ApplicationError) as info:
        await acts.resume(resume)
    assert info.value.type == "SnapshotIntegrityError"


async def test_no_session_is_held_while_a_program_waits(acts, pool):
    status = await acts.start(_start('ts = await tickets_list("open")\nlen(ts)\n'))
    assert status.state == "pending"
    assert pool.checked_out == 0


async def test_large_tool_result_flows_through_the_program(acts):
    tickets = [{"id": i, "due": f"2026-{1 + i % 12:02d}-01", "body": "lorem ipsum " * 100} for i in range(5000)]
    program = 'ts = await tickets_list("open")\n[t["id"] for t in ts if t["due"] < "2026-02"][:10]\n'
    status, _ = await _run(acts, program, {"tickets_list": lambda status: tickets})
    assert status.state == "completed"
    assert status.value == [i for i in range(5000) if 1 + i % 12 < 2][:10]


def test_snapshot_key_file_is_created_once_and_reused(tmp_path):
    settings = WorkerSettings(state_dir=tmp_path)
    key = load_snapshot_key(settings)
    assert (
        len(key) == 64 and load_snapshot_key(settings) == key
    )  # the file's text (64 hex characters) is the key, as AGENTSTEPS_SNAPSHOT_KEY's is
    assert (tmp_path / "snapshot.key").stat().st_mode & 0o777 == 0o600
    assert load_snapshot_key(WorkerSettings(state_dir=tmp_path, snapshot_key="s" * 32)) == b"s" * 32


async def test_gathered_calls_pause_together(acts):
    status = await acts.start(_start("import asyncio\nawait asyncio.gather(tickets_close(1), tickets_close(2))\n"))
    assert status.state == "pending"
    assert [c.call_id for c in status.calls] == status.awaiting == [0, 1]
    assert [json.loads(c.arguments) for c in status.calls] == [{"id": 1}, {"id": 2}]
    await asyncio.sleep(0)


async def test_a_live_program_resumes_without_the_store_and_a_lost_one_is_rebuilt_by_replay(acts, pool, store):
    """Issue 39: kept live, a paused program makes no store write; evicted (another worker, a restart), its
    resume answers ``needs_replay`` and, given the replay log, rebuilds it from its source and the recorded
    outcomes: the same value and output, each call reported once."""
    program = (
        'ts = await tickets_list("open")\n'
        'print("got", len(ts))\n'
        'a = await tickets_close(ts[0]["id"])\n'
        'b = await tickets_close(ts[1]["id"])\n'
        '[a["closed"], b["closed"]]\n'
    )
    answers = {"tickets_list": [{"id": 4}, {"id": 8}], "tickets_close": None}

    def answer(call) -> CallOutcome:
        value = answers[call.function] or {"closed": json.loads(call.arguments)["id"]}
        return CallOutcome(call_id=call.call_id, value=value)

    status = await acts.start(_start(program).model_copy(update={"keep_live": True}))
    assert status.state == "pending" and status.live and status.snapshot is None and status.replay is not None
    log, reported = status.replay, [c.call_id for c in status.calls]
    evicted = False
    while status.state == "pending":
        outcomes = [answer(c) for c in status.calls]
        resume = ResumeProgramInput(
            run_key="run-1",
            functions=FUNCTIONS,
            outcomes=outcomes,
            output=status.output,
            calls_made=status.calls_made,
            sandbox_seconds=status.sandbox_seconds,
            live=status.live,
            replay_calls=status.replay_calls,
        )
        if not evicted:  # the second pause is lost, as on another worker
            evicted = True
            await pool.live.close()
            lost = await acts.resume(resume)
            assert lost.needs_replay and lost.state == "pending"
            resume = resume.model_copy(update={"live": None, "replay": log})
        status = await acts.resume(resume)
        log = log.model_copy(update={"batches": [*log.batches, outcomes]})
        reported += [c.call_id for c in status.calls]
    assert status.state == "completed", status.error
    assert status.value == [4, 8] and status.output == "got 2\n"
    assert reported == [0, 1, 2]
    assert not [p for p in store.driver.root.rglob("*") if p.is_file()], "a live program wrote to the store"
    assert len(pool.live) == 0 and pool.checked_out == 0


async def test_a_replay_that_does_not_pause_where_the_record_says_fails_typed(acts):
    """A replay log that does not fit the program (another Monty, a tampered input) is refused, not guessed."""
    status = await acts.start(_start('await tickets_list("open")\n').model_copy(update={"keep_live": True}))
    assert status.replay is not None
    wrong = status.replay.model_copy(update={"batches": [[CallOutcome(call_id=7, value=[])]]})
    with pytest.raises(ApplicationError) as info:
        await acts.resume(
            ResumeProgramInput(
                run_key="run-1", functions=FUNCTIONS, outcomes=[CallOutcome(call_id=0, value=[])], replay=wrong
            )
        )
    assert info.value.type == "InvalidProgramResume" and info.value.non_retryable
