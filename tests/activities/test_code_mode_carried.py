"""Issue 39: a tool call a kept-live program waits on alone resumes that program in its own activity.

Real Monty, the real ``tools.call`` and sandbox activities (called directly: no workflow involved). The
call's result carries the program's next pause only when the program is live on this worker under the
run's key; otherwise, and whatever goes wrong while resuming, the call's result comes back alone and
unchanged, its tool made once (the workflow then resumes the program with ``code.resume``).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest_asyncio
from pydantic import BaseModel

from agentsteps.activities.sandbox import SandboxActivities, SandboxPool, SnapshotVault
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.contracts.code.carried import CarriedProgram, CarryingCallInput, carried_pause, program_outcome
from agentsteps.contracts.code.program import (
    CallOutcome,
    ProgramLimits,
    ProgramStatus,
    ResumeProgramInput,
    StartProgramInput,
)
from agentsteps.contracts.code.stubs import program_functions
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


class CloseArgs(BaseModel):
    id: int


class Closed(BaseModel):
    closed: int


@pytest_asyncio.fixture
async def world(tmp_path: Path):
    made: list[str] = []
    registry = ToolRegistry()

    @registry.tool(name="tickets.close", side_effects=True)
    async def close(args: CloseArgs, ctx: ToolContext) -> Closed:
        made.append(ctx.idempotency_key)
        return Closed(closed=args.id)

    pool = SandboxPool(max_processes=2)
    sandbox = SandboxActivities(pool, SnapshotVault(PayloadStore(LocalDirStorageDriver(tmp_path / "p")), b"k" * 32))
    tools = ToolActivities(registry, programs=sandbox.resume_carried)
    functions = program_functions(list(registry.schemas().values()))
    yield sandbox, tools, functions, made
    await pool.live.close()
    await pool.close()


async def _started(sandbox: SandboxActivities, functions, program: str, run_key: str = "run-1") -> ProgramStatus:
    status = await sandbox.start(
        StartProgramInput(
            run_key=run_key,
            program=program,
            functions=functions,
            limits=ProgramLimits(),
            now=NOW.isoformat(),
            seed=7,
            keep_live=True,
        )
    )
    assert status.state == "pending" and status.live is not None and len(status.awaiting) == 1
    return status


def _carried(status: ProgramStatus, functions, run_key: str = "run-1", call_id: int | None = None) -> CarriedProgram:
    resume = ResumeProgramInput(
        run_key=run_key,
        live=status.live,
        functions=functions,
        outcomes=[],
        output=status.output,
        calls_made=status.calls_made,
        sandbox_seconds=status.sandbox_seconds,
    )
    return CarriedProgram(call_id=status.awaiting[0] if call_id is None else call_id, resume=resume)


def _call(status: ProgramStatus, carried: CarriedProgram | None) -> CarryingCallInput:
    [call] = [c for c in status.calls if c.call_id == status.awaiting[0]]
    return CarryingCallInput(
        name="tickets.close",
        arguments=call.arguments,
        call_id=f"c{call.call_id}",
        idempotency_key=f"k{call.call_id}",
        program=carried,
    )


PROGRAM = (
    'a = await tickets_close(4)\nprint("closed", a["closed"])\nb = await tickets_close(8)\n[a["closed"], b["closed"]]\n'
)


async def test_each_call_resumes_its_program_live_here_and_answers_with_its_next_pause(world):
    sandbox, tools, functions, made = world
    status = await _started(sandbox, functions, PROGRAM)
    seen = 0
    while status.state == "pending":
        result = await tools.call(_call(status, _carried(status, functions)))
        following = carried_pause(result)
        assert following is not None, "the program was live here: the call should have resumed it"
        assert following.fed == [program_outcome(status.awaiting[0], result)]
        status = following
        seen += 1
    assert status.state == "completed", status.error
    assert status.value == [4, 8] and status.output == "closed 4\n"
    assert seen == 2 and made == ["k0", "k1"]
    assert len(sandbox.pool.live) == 0 and sandbox.pool.checked_out == 0


async def test_a_program_not_live_here_leaves_the_result_alone_and_its_tool_made_once(world):
    sandbox, tools, functions, made = world
    status = await _started(sandbox, functions, PROGRAM)
    gone = status.model_copy(update={"live": "0" * 32})  # another worker's, or one evicted here
    result = await tools.call(_call(status, _carried(gone, functions)))
    assert carried_pause(result) is None and json.loads(result.content) == {"closed": 4} and made == ["k0"]
    # The program itself is untouched: its own code.resume still finds it live.
    assert len(sandbox.pool.live) == 1


async def test_a_call_naming_another_runs_live_program_cannot_resume_it(world):
    """Hostile input: a carried program with the right live id under another run's key finds nothing."""
    sandbox, tools, functions, made = world
    status = await _started(sandbox, functions, PROGRAM, run_key="victim")
    result = await tools.call(_call(status, _carried(status, functions, run_key="intruder")))
    assert carried_pause(result) is None and made == ["k0"]
    answer = await sandbox.resume(
        _carried(status, functions, run_key="victim").resume.model_copy(
            update={"outcomes": [CallOutcome(call_id=0, value={"closed": 4})]}
        )
    )
    assert answer.state == "pending" and not answer.needs_replay, "the victim's program was taken"


async def test_a_program_that_cannot_take_the_outcome_never_fails_the_call(world):
    """A carried call id the program does not wait on (a malformed input): the resume fails inside the
    activity, the tool's result still comes back, with no program, and the interpreter is released."""
    sandbox, tools, functions, made = world
    status = await _started(sandbox, functions, PROGRAM)
    result = await tools.call(_call(status, _carried(status, functions, call_id=99)))
    assert carried_pause(result) is None and not result.is_error and made == ["k0"]
    assert len(sandbox.pool.live) == 0 and sandbox.pool.checked_out == 0
