"""Forking a session turn at every step: a new session from the source's state there, no effect repeated.

Real dev server, worker, Monty and scripted model over HTTP; ``charge`` does
not dedupe, and every execution is counted at the tool.
"""

from __future__ import annotations

import asyncio

import pytest
from agent_support import make_spec, start_columns_without_upsert
from charge_support import charge_rules, charging_registry
from session_support import session_id
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError

from agentsteps.client.session_forks import fork_session, plan_session_fork, start_session_fork
from agentsteps.client.sessions import close_session, continue_session, send_turn, session_state, session_turns
from agentsteps.contracts.errors import (
    InvalidTurnError,
    PayloadIntegrityError,
    PayloadMissingError,
    SessionBusyError,
    SessionClosedError,
    SessionNotFoundError,
)
from agentsteps.contracts.names import SA_TENANT
from agentsteps.contracts.quotas.wire import QuotaPlan
from agentsteps.contracts.session import SessionInput
from agentsteps.storage.payload_store import build_payload_store
from agentsteps.worker import build_data_converter, running_worker
from agentsteps.workflows.quota_gate import warm_tokenizer

CHARGES = 10


def tool_script() -> dict:
    rules = [
        {
            "match": {"role": "user", "contains": "charge everyone"},
            "reply": {"tool_calls": [{"name": "charge", "arguments": {"customer": 0}}]},
        },
        {"match": {"role": "user", "contains": "hello"}, "reply": {"content": "hi there"}},
    ]
    rules += charge_rules(CHARGES)[1:]  # then charge k + 1 once k is charged, and answer
    return {"rules": rules}


async def test_a_fork_at_every_step_of_a_session_turn_repeats_no_effect(client, settings, scripted):
    scripted.set_script(tool_script())
    executed: list[int] = []
    sid = session_id()
    spec = make_spec(tools=["charge"], max_steps=14)
    converter = build_data_converter(settings)
    async with running_worker(client, settings, registry=charging_registry(executed)):
        assert (
            await send_turn(client, spec, "hello", session_id=sid, task_queue=settings.task_queue)
        ).output == "hi there"
        source = await continue_session(client, sid, "charge everyone")
        assert source.turn == 2 and source.output == "all charged" and len(source.steps) == CHARGES + 1
        assert executed == list(range(CHARGES))
        forks = []
        for at_step in range(len(source.steps) + 1):
            fork_id, first = await fork_session(
                client, sid, 2, at_step, data_converter=converter, task_queue=settings.task_queue
            )
            forks.append(fork_id)
            assert first.turn == 2 and first.session_id == fork_id, at_step
            assert first.status == "completed" and first.output == "all charged", at_step
            # The fork took the turn's remaining steps only, each charge answered from the source's record.
            assert len(first.steps) == len(source.steps) - min(at_step, CHARGES), at_step
            assert first.effects == [], at_step
            # Its model had the conversation before the turn (turn 1) and was told of the source's charges.
            told = str(scripted.requests[-len(first.steps)].body["messages"])
            assert "hi there" in told and "which this session is a fork of" in told, at_step
        assert executed == list(range(CHARGES)), "an effect happened twice across the source and its forks"

        # A fork is a session: it takes more turns, and a charge asked again is answered from the record.
        again = await continue_session(client, forks[3], "charge everyone")
        assert again.turn == 3 and again.output == "all charged"
        assert executed == list(range(CHARGES))
        # A fork of a fork knows the first source's effects too.
        _, deeper = await fork_session(client, forks[3], 3, 0, data_converter=converter, task_queue=settings.task_queue)
        assert deeper.output == "all charged" and executed == list(range(CHARGES))
        # ... and inside the turn it was forked at, the steps before its own (the first source's) as well.
        _, inner = await fork_session(client, forks[3], 2, 2, data_converter=converter, task_queue=settings.task_queue)
        assert inner.output == "all charged" and len(inner.steps) == CHARGES + 1 - 3 - 2
        had = scripted.requests[-len(inner.steps)].body["messages"]
        assert [m["content"] for m in had if m["role"] == "tool"] == [f'{{"charged": {k}}}' for k in range(5)]

        # The source is untouched and keeps working.
        assert [t.turn for t in await session_turns(client, sid)] == [1, 2]
        after = await continue_session(client, sid, "hello again")
        assert after.turn == 3 and after.output == "hi there"
        state = await session_state(client, sid)
        assert state.turns == 3 and state.rewinds == []
    assert executed == list(range(CHARGES))


async def test_two_turns_sent_to_a_fork_before_its_state_is_bound_run_one_and_answer_the_other_busy(
    client, settings, scripted
):
    scripted.set_script(tool_script())
    executed: list[int] = []
    sid = session_id()
    converter = build_data_converter(settings)
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await send_turn(
            client, make_spec(tools=["charge"], max_steps=14), "hello", session_id=sid, task_queue=settings.task_queue
        )
        await continue_session(client, sid, "charge everyone")
        plan = await plan_session_fork(client, sid, 2, 3, data_converter=converter)
    # With no worker polling, the fork's turn and a second one both wait on the server; the fork's first
    # workflow task then binds its state (an activity) while both turns wait on it.
    first = asyncio.create_task(start_session_fork(client, plan, task_queue=settings.task_queue))
    while not await _exists(client, plan.fork_id):
        await asyncio.sleep(0.05)
    second = asyncio.create_task(continue_session(client, plan.fork_id, "hello"))
    await asyncio.sleep(1)  # the second update reaches the server before a worker polls
    async with running_worker(client, settings, registry=charging_registry(executed)):
        # Before the fix the second turn failed the workflow task on every attempt and both hung.
        answers = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 120)
        forked, busy = answers
        assert not isinstance(forked, BaseException), forked
        assert forked.turn == 2 and forked.output == "all charged" and forked.effects == []
        assert isinstance(busy, SessionBusyError), busy
        # The refused turn left nothing behind: the fork takes its next turn as any session does.
        after = await continue_session(client, plan.fork_id, "hello")
        assert after.turn == 3 and after.output == "hi there"
    assert executed == list(range(CHARGES))


async def _exists(client, workflow_id: str) -> bool:
    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return False
    return True


def program(code: str) -> dict:
    return {"content": f"```python\n{code}```"}


CODE_SCRIPT = {
    "rules": [
        {"match": {"contains": "set a"}, "reply": program("a = 'alpha'\na\n")},
        {"match": {"contains": "charge seven"}, "reply": program("r = await charge(customer=7)\nr\n")},
        {"match": {"contains": "set c"}, "reply": program("c = 'gamma'\nc\n")},
        {"match": {"contains": "show a"}, "reply": program("a\n")},
    ]
}


async def test_a_code_mode_fork_has_the_repl_memory_the_turn_started_with(client, settings, scripted):
    scripted.set_script(CODE_SCRIPT)
    executed: list[int] = []
    sid = session_id()
    spec = make_spec(mode="code", tools=["charge"])
    converter = build_data_converter(settings)
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await send_turn(client, spec, "set a", session_id=sid, task_queue=settings.task_queue)
        assert (await continue_session(client, sid, "charge seven")).output == {"charged": 7}
        await continue_session(client, sid, "set c")
        assert executed == [7]

        fork_id, first = await fork_session(client, sid, 2, 0, data_converter=converter, task_queue=settings.task_queue)
        assert first.turn == 2 and first.output == {"charged": 7}
        assert executed == [7], "the fork's program charged again"
        names = {v.name for v in (await session_state(client, fork_id)).variables}
        assert names == {"a", "r"}, names  # turn 1's memory and its own turn's; not turn 3's ``c``
        assert (await continue_session(client, fork_id, "show a")).output == "alpha"
        assert (await session_state(client, fork_id)).forked_from == sid

        # At a later turn the memory is the one that turn started with.
        later, _ = await fork_session(client, sid, 3, 0, data_converter=converter, task_queue=settings.task_queue)
        assert {v.name for v in (await session_state(client, later)).variables} == {"a", "r", "c"}
        # The source's memory is its own still.
        assert (await continue_session(client, sid, "show a")).output == "alpha"
        assert {v.name for v in (await session_state(client, sid)).variables} == {"a", "r", "c"}
    assert executed == [7]


async def test_forking_what_cannot_be_forked_is_a_clear_error(client, settings, scripted):
    scripted.set_script(tool_script())
    sid, other = session_id(), session_id()
    spec = make_spec(tools=["charge"], max_steps=14)
    converter = build_data_converter(settings)
    executed: list[int] = []
    with pytest.raises(SessionNotFoundError, match="no session"):
        await plan_session_fork(client, "no-such-session", 1, 0, data_converter=converter)
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await send_turn(client, spec, "hello", session_id=sid, task_queue=settings.task_queue)
        await continue_session(client, sid, "hello")
        await send_turn(client, spec, "hello", session_id=other, task_queue=settings.task_queue)
        with pytest.raises(InvalidTurnError, match="no turn 9"):
            await plan_session_fork(client, sid, 9, 0, data_converter=converter)
        with pytest.raises(InvalidTurnError, match="no turn 0"):
            await plan_session_fork(client, sid, 0, 0, data_converter=converter)
        with pytest.raises(InvalidTurnError, match="--at-step must be 0..1"):
            await plan_session_fork(client, sid, 2, 5, data_converter=converter)
        with pytest.raises(InvalidTurnError, match="--at-step"):
            await plan_session_fork(client, sid, 2, -1, data_converter=converter)

        # A fork input naming another session as the owner of this one's conversation is refused by the
        # worker before anything runs, and the fork session closes itself.
        plan = await plan_session_fork(client, sid, 2, 0, data_converter=converter)
        other_owner = (await client.get_workflow_handle(other).describe()).run_id
        assert plan.inp.fork is not None and plan.inp.fork.conversation is not None
        forged = plan.inp.model_copy(
            update={"fork": plan.inp.fork.model_copy(update={"session_id": other, "owner": f"{other}/{other_owner}"})}
        )
        with pytest.raises(PayloadIntegrityError):
            await start_session_fork(
                client, type(plan)(**{**plan.__dict__, "inp": forged}), task_queue=settings.task_queue
            )
        assert (await session_state(client, plan.fork_id)).status == "closed"

        collected = await plan_session_fork(client, other, 1, 0, data_converter=converter)
        await close_session(client, sid)
        with pytest.raises(SessionClosedError, match="has ended"):
            await plan_session_fork(client, sid, 1, 0, data_converter=converter)
    # The source's stored conversation was collected before the fork could take it: a worker that has not
    # read it before finds it missing, and the fork fails typed before anything runs.
    assert collected.inp.fork is not None and collected.inp.fork.conversation is None  # turn 1: a fresh start
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await continue_session(client, other, "hello")
        plan = await plan_session_fork(client, other, 2, 0, data_converter=converter)
    assert plan.inp.fork is not None and plan.inp.fork.conversation is not None
    build_payload_store(settings).driver.path_for(plan.inp.fork.conversation.claim["hash_value"]).unlink()
    async with running_worker(client, settings, registry=charging_registry(executed)):
        with pytest.raises(PayloadMissingError, match="cannot be read"):
            await start_session_fork(client, plan, task_queue=settings.task_queue)
    assert executed == []


async def test_the_fork_command_forks_a_session_turn_and_prints_it_as_json(client, settings, scripted):
    import argparse
    import contextlib
    import io

    from cli_json_support import pinned

    from agentsteps.cli.fork import fork_command
    from agentsteps.cli.json_output import FORK

    scripted.set_script(tool_script())
    executed: list[int] = []
    sid = session_id()
    on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})

    def args(**given: object) -> argparse.Namespace:
        return argparse.Namespace(
            **{"workflow_id": sid, "spec": None, "model": None, "input": None, "json": True, "no_worker": True, **given}
        )

    async with running_worker(client, settings, registry=charging_registry(executed)):
        await send_turn(
            client,
            make_spec(tools=["charge"], max_steps=14),
            "charge everyone",
            session_id=sid,
            task_queue=settings.task_queue,
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = await fork_command(on_this_server, args(turn=1, at_step=4))
        assert code == 0
        body = pinned(out.getvalue(), FORK)
        assert body["source"] == sid and body["turn"] == 1 and body["at_step"] == 4 and body["at_call"] is None
        assert body["fork_id"].startswith(f"{sid}-fork1.4-")
        assert body["result"]["status"] == "completed" and len(body["result"]["steps"]) == CHARGES + 1 - 4
        assert (await session_state(client, body["fork_id"])).status == "idle"  # a session, open for turns

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert await fork_command(on_this_server, args(turn=7, at_step=0)) == 2
        assert "no turn 7" in err.getvalue()
    assert executed == list(range(CHARGES))


async def test_a_fork_bills_where_its_source_does_and_its_start_sets_the_consoles_columns(client, settings, scripted):
    scripted.set_script(tool_script())
    sid = session_id()
    spec = make_spec(tools=[])
    converter = build_data_converter(settings)
    async with running_worker(client, settings):
        await send_turn(client, spec, "hello", session_id=sid, task_queue=settings.task_queue, tenant="acme")
        fork_id, first = await fork_session(client, sid, 1, 0, data_converter=converter, task_queue=settings.task_queue)
        assert first.output == "hi there"
        described = await client.get_workflow_handle(fork_id).describe()
        history = await client.get_workflow_handle(fork_id).fetch_history()

    started = history.events[0].workflow_execution_started_event_attributes
    inp = (await converter.decode(list(started.input.payloads), [SessionInput]))[0]
    assert (inp.tenant, inp.quota) == ("acme", None), "the tenant goes with the fork; its worker decides the plan"
    assert described.typed_search_attributes.get(SearchAttributeKey.for_keyword(SA_TENANT)) == "acme"
    assert await start_columns_without_upsert(client, fork_id) == spec.name
