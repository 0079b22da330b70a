"""Code mode end to end: real dev server, real Monty, real HTTP to the scripted model."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import pytest_asyncio
from code_mode_support import NudgeLedger, code_worker, connect_with_store, make_tickets, worker_settings
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agentsteps.activities.sandbox import SandboxPool
from agentsteps.client.fork_points import code_points, program_segments
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.code.program import ProgramLimits
from agentsteps.contracts.names import AGENT_WORKFLOW, CODE_RESUME, CODE_START, TOOLS_CALL
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.contracts.violations import ViolationKind

MODEL = "scripted-2026-01-01"


def program_reply(code: str) -> dict:
    return {"content": f"Here is the program.\n```python\n{code}```\n"}


def code_spec(**overrides) -> AgentSpec:
    data = {
        "name": "code-test",
        "model": LLMConfig(model=MODEL, max_tokens=512, context_window=64_000),
        "tools": ["tickets.list", "tickets.nudge", "wait"],
        "mode": "code",
        "max_steps": 4,
        "reprompt_budget": 1,
    }
    data.update(overrides)
    return AgentSpec(**data)


@pytest_asyncio.fixture
async def env(temporal_env, scripted, tmp_path):
    settings = worker_settings(tmp_path / "state", f"code-{uuid.uuid4().hex[:8]}", scripted.url_openai)
    address = temporal_env.client.service_client.config.target_host
    client = await connect_with_store(address, settings)
    pool = SandboxPool(max_processes=2)
    async with code_worker(client, settings, pool) as (_, sandbox):
        yield client, settings, sandbox


async def _run(client, settings, spec: AgentSpec, text: str = "nudge the stalled tickets") -> AgentResult:
    return await client.execute_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input=text),
        id=f"code-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )


async def _failure(client, settings, spec: AgentSpec) -> ApplicationError:
    with pytest.raises(WorkflowFailureError) as info:
        await _run(client, settings, spec)
    cause = info.value.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    assert isinstance(cause, ApplicationError)
    return cause


LIST_FILTER_SORT_NUDGE = """\
import asyncio
r = await tickets_list("open", count=30)
stalled = sorted([t for t in r["tickets"] if t["stalled"]], key=lambda t: t["due"])
done = await asyncio.gather(*[tickets_nudge(t["id"]) for t in stalled])
print("nudged", len(done))
[d["id"] for d in done]
"""


async def test_program_lists_filters_sorts_and_nudges_each_ticket_once(env, scripted):
    client, settings, _ = env
    scripted.set_script({"replies": [program_reply(LIST_FILTER_SORT_NUDGE)]})
    result = await _run(client, settings, code_spec())
    expected = [t.id for t in sorted((t for t in make_tickets(30) if t.stalled), key=lambda t: t.due)]
    assert result.status == "completed"
    assert result.output == expected
    assert NudgeLedger(settings.state_dir / "nudges.db").nudged() == sorted(expected)
    assert len(result.steps[-1].tool_calls) == 1 + len(expected)
    # The model saw the stubs, and only one model call was needed.
    [request] = scripted.requests
    assert "async def tickets_nudge(id: int" in str(request.body)


async def test_gathered_calls_run_concurrently(env, scripted):
    client, settings, _ = env
    program = "import asyncio\nawait asyncio.gather(wait(1.5), wait(1.5), wait(1.5), wait(1.5))\n'ok'\n"
    scripted.set_script({"replies": [program_reply(program)]})
    started = time.monotonic()
    result = await _run(client, settings, code_spec())
    elapsed = time.monotonic() - started
    assert result.output == "ok"
    assert elapsed < 4.0, f"four 1.5 s calls took {elapsed:.1f} s: they did not overlap"


async def test_type_errors_are_reprompted_with_the_diagnostics(env, scripted):
    client, settings, _ = env
    bad = 'r = await tickets_list(42)\nr["items"]\n'
    good = 'r = await tickets_list("open", count=3)\n[t["id"] for t in r["tickets"]]\n'
    scripted.set_script({"replies": [program_reply(bad), program_reply(good)]})
    result = await _run(client, settings, code_spec())
    assert result.status == "completed" and result.output == [1, 2, 3]
    assert {v.kind for v in result.violations} == {ViolationKind.program_type}
    second = str(scripted.requests[1].body)
    assert "invalid-argument-type" in second and "items" in second


async def test_no_sandbox_session_is_held_while_the_program_waits(env, scripted):
    client, settings, sandbox = env
    scripted.set_script({"replies": [program_reply("await wait(3)\n'done'\n")]})
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=code_spec(), input="wait"),
        id=f"code-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    await asyncio.sleep(2.0)
    assert sandbox.pool.checkouts_total >= 2  # checked, then started
    assert sandbox.pool.checked_out == 0
    assert (await handle.result()).output == "done"


async def test_hostile_program_fails_the_run_typed_and_the_worker_survives(env, scripted):
    client, settings, _ = env
    scripted.set_script({"replies": [program_reply("while True:\n    pass\n")]})
    error = await _failure(client, settings, code_spec(reprompt_budget=0))
    assert error.type == "ContractViolationError"
    assert "program_failed" in str(error) and "timeout" in str(error)
    scripted.set_script({"replies": [program_reply("1 + 1\n")]})
    assert (await _run(client, settings, code_spec())).output == 2


async def test_tampered_snapshot_fails_the_run_with_a_typed_error(env, scripted):
    client, settings, sandbox = env
    sandbox.replay_calls_bound = 0  # a snapshot at every pause, as before a long wait
    scripted.set_script({"replies": [program_reply("await wait(2)\n'done'\n")]})
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=code_spec(), input="wait"),
        id=f"code-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    store = settings.state_dir / "payloads" / "sha256"

    def snapshots() -> list:
        # The store also holds the run's conversation segments (read from the worker's cache): leave those.
        # Nor a write still in flight: it goes to a ``.tmp-`` file first, renamed when whole.
        return [
            p
            for p in store.rglob("*")
            if p.is_file() and not p.name.startswith(".tmp-") and b'"prev":' not in p.read_bytes()
        ]

    deadline = time.monotonic() + 10
    while not store.exists() or not snapshots():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    for path in snapshots():
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    await sandbox.pool.live.close()  # as if the worker restarted: the program is rebuilt from its snapshot
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    cause = info.value.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    assert cause is not None and cause.type == "SnapshotIntegrityError"


async def test_five_thousand_tickets_of_several_megabytes_flow_end_to_end(env, scripted):
    client, settings, _ = env
    program = (
        'r = await tickets_list("open", count=5000)\n'
        'print(len(r["tickets"]))\n'
        '[t for t in r["tickets"] if t["stalled"]]\n'
    )
    scripted.set_script({"replies": [program_reply(program)]})
    result = await _run(client, settings, code_spec())
    expected = [t.model_dump() for t in make_tickets(5000) if t.stalled]
    assert result.status == "completed"
    assert result.output == expected
    assert sum(len(t["body"]) for t in expected) > 1_000_000
    # The tool result, the snapshot and the run result went to the payload store, not history.
    stored = [p for p in (settings.state_dir / "payloads").rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in stored) > 5_000_000


SEQUENTIAL = (
    'a = await tickets_list("open", count=3)\n'
    'b = await tickets_list("open", count=4)\n'
    'c = await tickets_list("open", count=5)\n'
    '[len(a["tickets"]), len(b["tickets"]), len(c["tickets"])]\n'
)


async def _local_activities(client, history) -> list[str]:
    kinds = []
    for event in history.events:
        marker = event.marker_recorded_event_attributes
        if event.HasField("marker_recorded_event_attributes") and marker.marker_name == "core_local_activity":
            data = (await client.data_converter.decode(list(marker.details["data"].payloads), [dict]))[0]
            kinds.append(data["activity_type"])
    return kinds


async def test_a_call_without_time_left_for_a_whole_segment_leaves_the_resume_to_code_resume(env, scripted):
    """A tool timeout too short to also hold a whole segment (``segment_seconds`` plus a margin): the call's
    activity returns its result alone, so a slow segment can never time the call out after its tool ran."""
    client, settings, _ = env
    scripted.set_script({"replies": [program_reply(SEQUENTIAL)]})
    spec = code_spec(
        tool_policy=ActivityPolicy(start_to_close_seconds=6.0), code_limits=ProgramLimits(segment_seconds=5.0)
    )
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="count"),
        id=f"code-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    assert (await handle.result()).output == [3, 4, 5]
    kinds = await _local_activities(client, await handle.fetch_history())
    assert kinds.count(CODE_RESUME) == 3, kinds


async def test_a_sequential_call_costs_one_activity_and_its_history_still_holds_every_pause(env, scripted):
    """Issue 39: each call its program waits on alone resumes the program in its own ``tools.call`` activity,
    so a sequential call adds no ``code.resume`` segment; the pauses it answered with are in history, where a
    fork finds them (one point before each call)."""
    client, settings, _ = env
    scripted.set_script({"replies": [program_reply(SEQUENTIAL)]})
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=code_spec(), input="count"),
        id=f"code-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    result = await handle.result()
    assert result.output == [3, 4, 5]
    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled.count(TOOLS_CALL) == 3
    kinds = await _local_activities(client, history)
    assert CODE_START in kinds and CODE_RESUME not in kinds, kinds
    [segments] = await program_segments(history, client.data_converter)
    assert [s.state for s in segments] == ["pending", "pending", "pending", "completed"]
    points = code_points(result.steps, [segments])
    assert [(p.step, p.call_id) for p in points] == [(0, None), (0, 0), (0, 1), (0, 2), (1, None)]
