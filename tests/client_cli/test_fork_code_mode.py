"""Forking a code-mode run: the program's memory at each step, and no effect repeated.

Real dev server, worker, Monty and scripted model over HTTP. ``charge`` does not
dedupe and counts every execution at the tool. In code mode the steps are the
model calls and the calls programs made, so a ten-charge program has a step
before each charge: a fork there resumes the program from the source's
snapshot (re-bound to the fork by the worker), with the charges it had already
made in its variables.
"""

from __future__ import annotations

import json

import pytest
from agent_support import make_spec
from cli_json_support import pinned
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from test_fork import CHARGES, charging_registry

from agentsteps.activities.sandbox import activities as sandbox_activities
from agentsteps.cli.json_output import FORK
from agentsteps.client.forks import fork_run, plan_fork, start_fork
from agentsteps.contracts import AgentInput, AgentResult, InvalidSpecError
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.storage.payload_store import LocalDirStorageDriver
from agentsteps.worker import build_data_converter, running_worker

PROGRAM = f"""\
charged = []
for c in range({CHARGES}):
    r = await charge(c)
    charged.append(r["charged"])
{{"charged": charged}}
"""
OUTPUT = {"charged": list(range(CHARGES))}
POINTS = 1 + CHARGES + 1  # the model call, a step before each charge, and after the end


def code_spec(**overrides):
    return make_spec(**{"tools": ["charge"], "mode": "code", "max_steps": 4, **overrides})


async def run_source(client, settings, workflow_id: str) -> AgentResult:
    return await client.execute_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=code_spec(), input="charge everyone"),
        id=workflow_id,
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )


def failure_type(exc: WorkflowFailureError) -> str | None:
    cause: BaseException | None = exc.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    return cause.type if isinstance(cause, ApplicationError) else None


async def test_a_fork_at_every_step_of_a_ten_tool_program_has_its_memory_and_repeats_no_effect(
    client, settings, scripted
):
    scripted.set_script({"default": {"content": f"```python\n{PROGRAM}```"}})
    executed: list[int] = []
    source_id = f"code-source-{settings.task_queue}"
    async with running_worker(client, settings, registry=charging_registry(executed)):
        source = await run_source(client, settings, source_id)
        assert source.status == "completed" and source.output == OUTPUT and len(source.steps) == 1
        assert executed == list(range(CHARGES))
        converter = build_data_converter(settings)
        for at_step in range(POINTS):
            asked = len(scripted.requests)
            plan = await plan_fork(client, source_id, at_step, data_converter=converter)
            fork = await (await start_fork(client, plan, task_queue=settings.task_queue)).result()
            assert fork.status == "completed" and fork.output == OUTPUT, at_step
            made = [json.loads(c.arguments) for s in fork.steps for c in s.tool_calls]
            if 1 <= at_step <= CHARGES:
                first = at_step - 1
                assert plan.at_call == f"p0-{first}" and "before its call p0-" in plan.where
                # Resumed inside the program: no model call, the charges before the step are in its memory
                # (the value lists them) though the fork never made them.
                assert len(scripted.requests) == asked, at_step
                assert [m["customer"] for m in made] == list(range(first, CHARGES)), at_step
            else:
                assert plan.at_call is None and len(scripted.requests) == asked + 1, at_step
                assert len(made) == CHARGES
            charged = [c for s in fork.steps for c in s.tool_calls]
            assert all(json.loads(c.content)["charged"] in range(CHARGES) and not c.is_error for c in charged)
            assert fork.effects == [], at_step  # every charge answered from the source's record
        # A fork of a fork, inside the program it resumed: the memory the first fork signed for itself.
        first = await fork_run(client, source_id, 4, data_converter=converter, task_queue=settings.task_queue)
        await first.result()
        plan = await plan_fork(client, first.id, 2, data_converter=converter)
        assert plan.at_call == "p0-4"
        again = await (await start_fork(client, plan, task_queue=settings.task_queue)).result()
        assert again.output == OUTPUT and [c.call_id for c in again.steps[0].tool_calls] == [
            f"p0-{c}" for c in range(4, CHARGES)
        ]
    assert executed == list(range(CHARGES)), "an effect happened twice across the source and its forks"


async def test_forking_a_code_mode_run_where_it_cannot_be_forked_is_a_clear_error(
    client, settings, scripted, monkeypatch
):
    # A snapshot every third pause (the replay bound, as past 200 pauses or before a long wait): step 4 forks
    # at a stored snapshot, step 5 replays from it; the other steps replay from the start.
    monkeypatch.setattr(sandbox_activities, "REPLAY_CALLS_BOUND", 3)
    scripted.set_script({"default": {"content": f"```python\n{PROGRAM}```"}})
    executed: list[int] = []
    source_id, other_id = f"code-a-{settings.task_queue}", f"code-b-{settings.task_queue}"
    converter = build_data_converter(settings)
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await run_source(client, settings, source_id)
        await run_source(client, settings, other_id)
        assert executed == list(range(CHARGES)) * 2
        # A fork that replays from the source's stored snapshot (re-bound to it) has the memory it had.
        fork = await (
            await fork_run(client, source_id, 5, data_converter=converter, task_queue=settings.task_queue)
        ).result()
        assert fork.output == OUTPUT and executed == list(range(CHARGES)) * 2
        # A step that does not exist: the message says what the steps are.
        with pytest.raises(InvalidSpecError, match=r"steps 0\.\.10 \(code mode.*must be 0\.\.11"):
            await plan_fork(client, source_id, POINTS, data_converter=converter)
        # Inside a program: no new user message, no other tools, no change of mode.
        with pytest.raises(InvalidSpecError, match="--input"):
            await plan_fork(client, source_id, 4, data_converter=converter, user_input="and refund")
        with pytest.raises(InvalidSpecError, match="source's tools"):
            await plan_fork(client, source_id, 4, data_converter=converter, spec=code_spec(tools=["get_weather"]))
        with pytest.raises(InvalidSpecError, match="same mode"):
            await plan_fork(client, source_id, 4, data_converter=converter, spec=make_spec(tools=["charge"]))

        # A fork input made by hand: a pending call to a function the fork's tools do not offer, a program that
        # is not paused. Typed failures before anything runs.
        plan = await plan_fork(client, source_id, 4, data_converter=converter)
        assert plan.inp.fork is not None and plan.inp.fork.program is not None
        paused = plan.inp.fork.program.paused
        for bad in (
            paused.model_copy(update={"calls": [c.model_copy(update={"function": "refund"}) for c in paused.calls]}),
            paused.model_copy(update={"state": "completed"}),
        ):
            program = plan.inp.fork.program.model_copy(update={"paused": bad})
            crafted = plan.inp.model_copy(update={"fork": plan.inp.fork.model_copy(update={"program": program})})
            with pytest.raises(WorkflowFailureError) as failed:
                await client.execute_workflow(
                    AGENT_WORKFLOW,
                    crafted,
                    id=f"crafted-{len(executed)}-{bad.state}",
                    task_queue=settings.task_queue,
                    result_type=AgentResult,
                )
            assert failure_type(failed.value) == "InvalidSpecError"

        # Another run's memory under this source's name: the worker checks the snapshot against the source's
        # key and refuses it before the fork makes any call.
        plan = await plan_fork(client, source_id, 4, data_converter=converter)
        other = await plan_fork(client, other_id, 4, data_converter=converter)
        assert plan.inp.fork and plan.inp.fork.program and other.inp.fork and other.inp.fork.program
        forged = plan.inp.fork.program.model_copy(update={"paused": other.inp.fork.program.paused})
        plan.inp.fork = plan.inp.fork.model_copy(update={"program": forged})
        with pytest.raises(WorkflowFailureError) as failed:
            await (await start_fork(client, plan, task_queue=settings.task_queue)).result()
        assert failure_type(failed.value) == "SnapshotIntegrityError"

        # A source whose payloads were collected: the fork fails typed, naming the snapshot, and makes no call.
        snapshot = other.inp.fork.program.paused.snapshot
        assert snapshot is not None
        LocalDirStorageDriver(settings.state_dir / "payloads").path_for(snapshot.claim["hash_value"]).unlink()
        with pytest.raises(WorkflowFailureError) as failed:
            await (
                await fork_run(client, other_id, 4, data_converter=converter, task_queue=settings.task_queue)
            ).result()
        assert failure_type(failed.value) == "SnapshotIntegrityError"
        assert snapshot.sha256[:12] in str(failed.value.cause)
    assert executed == list(range(CHARGES)) * 2, "a refused fork made a call"


async def test_a_fork_of_a_failed_source_knows_the_effects_its_history_shows(client, settings, scripted):
    # The program charges five customers, then breaks: the run fails with no result (no effect record in it).
    failing = "for c in range(5):\n    await charge(c)\nraise ValueError('the ledger is down')\n"
    scripted.set_script({"default": {"content": f"```python\n{failing}```"}})
    executed: list[int] = []
    source_id = f"code-failed-{settings.task_queue}"
    converter = build_data_converter(settings)
    async with running_worker(client, settings, registry=charging_registry(executed)):
        with pytest.raises(WorkflowFailureError):
            await client.execute_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=code_spec(max_steps=1), input="charge five"),
                id=source_id,
                task_queue=settings.task_queue,
                result_type=AgentResult,
            )
        assert executed == list(range(5))
        plan = await plan_fork(client, source_id, 3, data_converter=converter)
        assert plan.inp.fork is not None and len(plan.inp.fork.effects) == 5
        # Resumed before the third charge: charges 2..4 come from the record, and the program breaks again.
        assert plan.at_call == "p0-2"
        with pytest.raises(WorkflowFailureError):
            await (await start_fork(client, plan, task_queue=settings.task_queue)).result()
        assert executed == list(range(5))
        # From the model step, a program that completes: the five charges answered, the other five made.
        scripted.set_script({"default": {"content": f"```python\n{PROGRAM}```"}})
        fork = await (
            await fork_run(
                client,
                source_id,
                0,
                data_converter=converter,
                task_queue=settings.task_queue,
                spec=code_spec(max_steps=2),
            )
        ).result()
        assert fork.output == OUTPUT
    assert executed == list(range(CHARGES)), "a charge the failed source made was made again"


async def test_the_fork_command_names_the_call_a_code_mode_fork_starts_before(client, settings, scripted):
    import argparse
    import contextlib
    import io

    from agentsteps.cli.fork import fork_command

    scripted.set_script({"default": {"content": f"```python\n{PROGRAM}```"}})
    executed: list[int] = []
    on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await run_source(client, settings, f"cli-code-{settings.task_queue}")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = await fork_command(
                on_this_server,
                argparse.Namespace(
                    workflow_id=f"cli-code-{settings.task_queue}",
                    at_step=4,
                    spec=None,
                    model=None,
                    input=None,
                    json=True,
                    no_worker=True,
                ),
            )
    assert code == 0
    body = pinned(out.getvalue(), FORK)
    assert body["at_step"] == 4 and body["at_call"] == "p0-3"
    assert body["result"]["status"] == "completed" and body["result"]["output"] == OUTPUT
    assert executed == list(range(CHARGES))
