"""Forks compose: a fork of a fork at step N sends its model exactly the conversation its parent had before N.

Real dev server, worker and scripted model over HTTP; what each model saw is
read from the requests the scripted model received.
"""

from __future__ import annotations

import argparse

import pytest
from agent_support import make_spec
from charge_support import charge_rules, charging_registry
from temporalio.service import RPCError

from agentsteps.cli.fork import fork_command
from agentsteps.client.forks import fork_run
from agentsteps.contracts import AgentInput, AgentResult, InvalidSpecError
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import build_data_converter, running_worker

CHARGES = 6


def script() -> dict:
    return {"rules": charge_rules(CHARGES)}


def conversation(request) -> list[dict]:
    """What the model was sent after its system prompt (which names the run a fork comes from)."""
    return [m for m in request.body["messages"] if m["role"] != "system"]


async def _forked(client, settings, scripted, source: str, at_step: int, **kwargs) -> tuple[str, list]:
    """Run the fork of ``source`` at ``at_step`` to its end; its id and the requests its model received."""
    before = len(scripted.requests)
    handle = await fork_run(
        client,
        source,
        at_step,
        data_converter=build_data_converter(settings),
        task_queue=settings.task_queue,
        **kwargs,
    )
    result = await handle.result()
    assert result.status == "completed" and result.output == "all charged", (source, at_step)
    return handle.id, list(scripted.requests[before:])


async def test_a_fork_of_a_fork_sends_the_conversation_its_parent_had_before_that_step(client, settings, scripted):
    scripted.set_script(script())
    executed: list[int] = []
    source = f"compose-{settings.task_queue}"
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=["charge"], max_steps=10), input="charge everyone"),
            id=source,
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        first, first_sent = await _forked(client, settings, scripted, source, 3)
        # F's model saw the user input and S's three charges before its first step.
        assert len(conversation(first_sent[0])) == 1 + 3 * 2
        for at_step in (0, 2):
            _, sent = await _forked(client, settings, scripted, first, at_step)
            assert conversation(sent[0]) == conversation(first_sent[at_step]), at_step
        # A fork of a --model fork: the same, on the other model.
        other = "scripted-2026-02-02"
        by_model, by_model_sent = await _forked(client, settings, scripted, source, 2, model=other)
        assert by_model_sent[0].body["model"] == other
        _, sent = await _forked(client, settings, scripted, by_model, 1)
        assert sent[0].body["model"] == other
        assert conversation(sent[0]) == conversation(by_model_sent[1])
        # Three levels down, step 0 is still the grandparent's conversation at its step.
        grand, grand_sent = await _forked(client, settings, scripted, first, 1)
        _, sent = await _forked(client, settings, scripted, grand, 0)
        assert conversation(sent[0]) == conversation(grand_sent[0]) == conversation(first_sent[1])
    assert sorted(executed) == list(range(CHARGES)), "a fork repeated an effect"


async def test_a_fork_onto_an_unknown_model_is_refused_before_anything_starts(client, settings, scripted):
    scripted.set_script(script())
    executed: list[int] = []
    source = f"unknown-model-{settings.task_queue}"
    async with running_worker(client, settings, registry=charging_registry(executed)):
        await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=["charge"], max_steps=10), input="charge everyone"),
            id=source,
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        fork_id = f"{source}-never"
        with pytest.raises(InvalidSpecError, match="gpt4") as refused:
            await fork_run(
                client,
                source,
                2,
                data_converter=build_data_converter(settings),
                task_queue=settings.task_queue,
                model="gpt4",
                fork_id=fork_id,
            )
        assert "\n" not in str(refused.value)
        with pytest.raises(RPCError):  # no run was started, so none failed
            await client.get_workflow_handle(fork_id).describe()
        # The command says the same, before it prints that a fork started.
        on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
        args = argparse.Namespace(
            workflow_id=source, at_step=2, spec=None, model="gpt4", input=None, json=True, no_worker=True, turn=None
        )
        with pytest.raises(InvalidSpecError, match="not pinned"):
            await fork_command(on_this_server, args)
    assert executed == list(range(CHARGES))
