"""``agentsteps replay WORKFLOW_ID... --model``: recorded runs re-decided by another model, no tool executed.

Real dev server, worker and scripted model over HTTP; tool executions are
counted at the tools. Model B was scripted to agree on 18 runs and, on the
last two, to ask for an order the recorded run never looked up (then answer
otherwise), and to spend fewer tokens throughout.
"""

from __future__ import annotations

import argparse
import io
import json

import pytest
from agent_support import make_spec, start_columns_without_upsert
from cli_json_support import pinned
from pydantic import BaseModel

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.cli.json_output import COUNTERFACTUAL
from agentsteps.cli.replay import EXIT_FAILED, EXIT_INVALID, EXIT_OK, replay_command
from agentsteps.contracts import AgentInput, InvalidSpecError
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker

MODEL_A, MODEL_B = "scripted-2026-01-01", "scripted-b-2026-03-01"
RUNS = 20
DIFFERENT = {18, 19}


class Order(BaseModel):
    order_id: int


def counting_registry(executed: list[tuple[str, int]]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool()
    def lookup(args: Order, ctx: ToolContext) -> dict:
        """Look an order up."""
        executed.append(("lookup", args.order_id))
        return {"order_id": args.order_id, "status": "shipped"}

    @registry.tool(side_effects=True)
    def refund(args: Order, ctx: ToolContext) -> dict:
        """Refund an order (does not dedupe)."""
        executed.append(("refund", args.order_id))
        return {"refunded": args.order_id}

    return registry


def script() -> dict:
    rules = []
    for i in range(RUNS):
        tag = f"order {i:02d}"
        asked = i + 100 if i in DIFFERENT else i
        rules += [
            {
                "match": {"model": MODEL_A, "role": "user", "contains": tag},
                "reply": {
                    "tool_calls": [
                        {"name": "lookup", "arguments": {"order_id": i}},
                        {"name": "refund", "arguments": {"order_id": i}},
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20},
                },
            },
            {
                "match": {"model": MODEL_A, "role": "tool", "any_contains": tag},
                "reply": {
                    "content": f"{tag} shipped and refunded",
                    "usage": {"prompt_tokens": 150, "completion_tokens": 30},
                },
            },
            {
                "match": {"model": MODEL_B, "role": "user", "contains": tag},
                "reply": {
                    "tool_calls": [
                        {"name": "refund", "arguments": {"order_id": i}},
                        {"name": "lookup", "arguments": {"order_id": asked}},
                    ],
                    "usage": {"prompt_tokens": 60, "completion_tokens": 10},
                },
            },
            {
                "match": {"model": MODEL_B, "role": "tool", "any_contains": tag},
                "reply": {
                    "content": f"{tag} status unknown" if i in DIFFERENT else f"{tag} shipped and refunded",
                    "usage": {"prompt_tokens": 90, "completion_tokens": 20},
                },
            },
        ]
    return {"rules": rules}


def args(ids, **given) -> argparse.Namespace:
    base = dict(
        workflow_ids=ids,
        check=False,
        histories=None,
        workflow_type=None,
        query=None,
        limit=50,
        spec=None,
        model=f"openai:{MODEL_B}",
        allow_tools="",
        max_differ=0,
        json=True,
    )
    base.update(given)
    return argparse.Namespace(**base)


async def test_twenty_recorded_runs_replayed_with_another_model_execute_no_tool(client, settings, scripted):
    scripted.set_script(script())
    executed: list[tuple[str, int]] = []
    spec = make_spec(tools=["lookup", "refund"], model=make_spec().model.model_copy(update={"model": MODEL_A}))
    ids = []
    async with running_worker(client, settings, registry=counting_registry(executed)):
        for i in range(RUNS):
            handle = await client.start_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=spec, input=f"where is order {i:02d}?"),
                id=f"source-{i:02d}-{settings.task_queue}",
                task_queue=settings.task_queue,
            )
            ids.append(handle.id)
            assert (await handle.result())["status"] == "completed"
    assert sorted(executed) == sorted([("lookup", i) for i in range(RUNS)] + [("refund", i) for i in range(RUNS)])
    executed_before = list(executed)

    on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
    out = io.StringIO()
    code = await replay_command(on_this_server, args(ids), out)
    body = pinned(out.getvalue(), COUNTERFACTUAL)

    assert executed == executed_before, "a replay executed a tool"
    assert code == EXIT_FAILED  # two runs differ and --max-differ is 0
    summary = body["summary"]
    assert summary["runs"] == RUNS and summary["same_answer"] == RUNS - 2 and summary["differ"] == 2
    # Every call model B repeated was answered from its source run's record: 2 per run, but the 2 new lookups.
    assert summary["answered_from_record"] == 2 * RUNS - 2
    assert summary["not_executed_calls"] == 2 and summary["live_calls"] == 0
    assert summary["tokens"][1] < summary["tokens"][0] and summary["tokens_change"].startswith("-")
    by_source = {r["source_id"]: r for r in body["runs"]}
    # A replay's start set the console's columns, as start_agent_run's does: it upserted none at its start.
    assert await start_columns_without_upsert(client, body["runs"][0]["replay_id"]) == spec.name
    for i in range(RUNS):
        run = by_source[ids[i]]
        assert run["status"] == ["completed", "completed"]
        if i in DIFFERENT:
            assert run["differs"] and not run["same_output"]
            assert run["not_executed"] == [f'lookup({{"order_id":{i + 100}}})']
            assert run["tool_calls_only_in_source"] == [f'lookup({{"order_id":{i}}})']
            assert run["tool_calls_only_in_replay"] == [f'lookup({{"order_id":{i + 100}}})']
            assert run["output"] == [f"order {i:02d} shipped and refunded", f"order {i:02d} status unknown"]
        else:
            assert not run["differs"] and run["same_output"], run
            assert run["tool_calls_only_in_source"] == [] and run["tool_calls_only_in_replay"] == []

    # The readable table says the same, and a gate that tolerates two differing runs passes.
    out = io.StringIO()
    assert await replay_command(on_this_server, args(ids, json=False, max_differ=2), out) == EXIT_OK
    text = out.getvalue()
    assert f"{RUNS} runs: {RUNS - 2} same answer, 2 differ; tokens -" in text
    assert 'not executed (no recorded match): lookup({"order_id":118})' in text
    assert executed == executed_before


async def test_bad_replay_arguments_exit_2(client, settings):
    on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
    assert await replay_command(on_this_server, args([])) == EXIT_INVALID
    assert await replay_command(on_this_server, args(["x"], model=None)) == EXIT_INVALID
    assert await replay_command(on_this_server, args(["gone-run"])) == EXIT_INVALID  # no such history
    assert await replay_command(on_this_server, args(["x"], allow_tools="no_such_tool")) == EXIT_INVALID
    assert await replay_command(on_this_server, args(["x"], allow_tools="send_notification")) == EXIT_INVALID


async def test_a_malformed_model_is_a_typed_error_before_any_replay_starts(client, settings, scripted):
    scripted.set_script({"default": {"content": "hi"}})
    async with running_worker(client, settings):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=[]), input="hi"),
            id=f"src-{settings.task_queue}",
            task_queue=settings.task_queue,
        )
        await handle.result()
    on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
    with pytest.raises(InvalidSpecError, match="provider"):
        await replay_command(on_this_server, args([handle.id], model="bogus:some-model-2026-01-01"))
    assert [e async for e in client.list_workflows(f'WorkflowId STARTS_WITH "replay-{handle.id}"')] == []
