"""Forking a recorded run at every step: each external effect happens once across the source and all forks.

Real dev server, worker and scripted model over HTTP; ``charge`` does not
dedupe, and every execution is counted at the tool.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from agent_support import make_spec, start_columns_without_upsert
from charge_support import charge_rules, charging_registry
from cli_json_support import pinned
from temporalio.common import SearchAttributeKey

from agentsteps.cli.json_output import FORK
from agentsteps.client.forks import fork_run
from agentsteps.client.runs import start_agent_run
from agentsteps.contracts import AgentInput, AgentResult, InvalidSpecError
from agentsteps.contracts.errors import HistoryUnavailableError
from agentsteps.contracts.names import AGENT_WORKFLOW, SA_TENANT
from agentsteps.contracts.quotas.wire import QuotaPlan
from agentsteps.worker import build_data_converter, running_worker
from agentsteps.workflows.quota_gate import warm_tokenizer

CHARGES = 10


def script() -> dict:
    return {"rules": charge_rules(CHARGES)}


async def test_a_fork_at_every_step_of_a_ten_tool_run_repeats_no_effect(client, settings, scripted):
    scripted.set_script(script())
    executed: list[int] = []
    spec = make_spec(tools=["charge"], max_steps=14)
    async with running_worker(client, settings, registry=charging_registry(executed)):
        source = await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="charge everyone"),
            id=f"source-{settings.task_queue}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        assert source.status == "completed" and len(source.steps) == CHARGES + 1
        assert executed == list(range(CHARGES))
        converter = build_data_converter(settings)
        for at_step in range(len(source.steps) + 1):
            handle = await fork_run(
                client,
                f"source-{settings.task_queue}",
                at_step,
                data_converter=converter,
                task_queue=settings.task_queue,
            )
            fork = await handle.result()
            assert fork.status == "completed" and fork.output == "all charged", at_step
            # The fork took the remaining steps only, each charge answered from the source's record.
            assert len(fork.steps) == len(source.steps) - min(at_step, CHARGES), at_step
            charged = [c for s in fork.steps for c in s.tool_calls]
            assert all(json.loads(c.content) == {"charged": json.loads(c.arguments)["customer"]} for c in charged)
            assert fork.effects == []  # nothing took effect in the fork itself
        # A fork of a fork knows the first source's effects too, though the middle run only inherited them.
        again = await fork_run(client, handle.id, 0, data_converter=converter, task_queue=settings.task_queue)
        assert (await again.result()).output == "all charged"
        # Its start set the console's columns, as start_agent_run's does: the fork upserted none at its start.
        assert await start_columns_without_upsert(client, again.id) == spec.name
    assert sorted(executed) == list(range(CHARGES)), "an effect happened twice across the source and its forks"
    # The fork's model was told what the source did (the first request of the last fork).
    first = [r for r in scripted.requests if "which this run is a fork of" in str(r.body)]
    assert first and "charge" in str(first[-1].body)


async def test_forking_what_cannot_be_forked_is_a_clear_error(client, settings, scripted):
    scripted.set_script({"default": {"content": "hi"}})
    converter = build_data_converter(settings)
    with pytest.raises(HistoryUnavailableError):
        await fork_run(client, "no-such-run", 0, data_converter=converter, task_queue=settings.task_queue)
    async with running_worker(client, settings):
        await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(), input="hi"),
            id=f"short-{settings.task_queue}",
            task_queue=settings.task_queue,
        )
    with pytest.raises(InvalidSpecError, match="--at-step"):
        await fork_run(
            client, f"short-{settings.task_queue}", 5, data_converter=converter, task_queue=settings.task_queue
        )
    with pytest.raises(InvalidSpecError, match="--at-step"):
        await fork_run(
            client, f"short-{settings.task_queue}", -1, data_converter=converter, task_queue=settings.task_queue
        )


async def test_the_fork_command_prints_the_fork_as_json(client, settings, scripted):
    import argparse
    import contextlib
    import io

    from agentsteps.cli.fork import fork_command

    scripted.set_script(script())
    executed: list[int] = []
    on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=["charge"], max_steps=14), input="charge everyone"),
            id=f"cli-source-{settings.task_queue}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = await fork_command(
                on_this_server,
                argparse.Namespace(
                    workflow_id=f"cli-source-{settings.task_queue}",
                    at_step=3,
                    spec=None,
                    model=None,
                    input=None,
                    json=True,
                    no_worker=True,
                ),
            )
    assert code == 0
    body = pinned(out.getvalue(), FORK)
    assert body["source"] == f"cli-source-{settings.task_queue}" and body["at_step"] == 3
    assert body["fork_id"].startswith(f"cli-source-{settings.task_queue}-fork3-")
    assert body["result"]["status"] == "completed" and len(body["result"]["steps"]) == CHARGES + 1 - 3
    assert executed == list(range(CHARGES))


async def test_a_fork_bills_where_its_source_does(client, settings, scripted):
    scripted.set_script({"rules": [], "default": {"content": "done"}})
    converter = build_data_converter(settings)
    source_id = f"billed-{settings.task_queue}"
    async with running_worker(client, settings):
        await start_agent_run(
            client,
            make_spec(tools=[]),
            "hello",
            workflow_id=source_id,
            task_queue=settings.task_queue,
            tenant="acme",
        )
        assert (await client.get_workflow_handle(source_id, result_type=AgentResult).result()).output == "done"
        fork = await fork_run(client, source_id, 0, data_converter=converter, task_queue=settings.task_queue)
        assert (await fork.result()).output == "done"
        started = (await fork.fetch_history()).events[0].workflow_execution_started_event_attributes
        described = await fork.describe()
    inp = (await converter.decode(list(started.input.payloads), [AgentInput]))[0]
    assert (inp.tenant, inp.quota) == ("acme", None), "the tenant goes with the fork; its worker decides the plan"
    assert described.typed_search_attributes.get(SearchAttributeKey.for_keyword(SA_TENANT)) == "acme"
