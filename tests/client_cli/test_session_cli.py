"""A session driven entirely by name with plain JSON from the ``temporal`` CLI (any-language backends)."""

from __future__ import annotations

import asyncio
import json
import uuid

from agent_support import MODEL

from agentsteps.client.dev_server import temporal_binary
from agentsteps.contracts.names import CLOSE_UPDATE, SESSION_WORKFLOW, STATE_QUERY, TURN_UPDATE, TURNS_QUERY


async def cli(env, *args: str) -> dict:
    # Asynchronously: the worker under test runs on this event loop.
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(),
        *args,
        "--address",
        env.client.service_client.config.target_host,
        "-o",
        "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return json.loads(out)


async def test_a_session_is_started_continued_queried_and_closed_from_the_temporal_cli(engine, scripted, temporal_env):
    scripted.set_script(
        {
            "rules": [
                {"match": {"contains": "my name", "any_contains": "I am Ada"}, "reply": {"content": "You are Ada."}}
            ],
            "default": {"content": "Noted."},
        }
    )
    sid = f"cli-session-{uuid.uuid4().hex[:8]}"
    spec = {"spec": {"name": "desk", "model": {"model": MODEL, "max_tokens": 64, "context_window": 8000}}}

    async def turn(text: str) -> dict:
        # The same command creates the session the first time and continues it afterwards.
        return await cli(
            temporal_env,
            "workflow",
            "execute-update-with-start",
            "--update-name",
            TURN_UPDATE,
            "--update-input",
            json.dumps({"input": text}),
            "--workflow-id",
            sid,
            "--type",
            SESSION_WORKFLOW,
            "--task-queue",
            engine.task_queue,
            "--id-conflict-policy",
            "UseExisting",
            "--input",
            json.dumps(spec),
        )

    first, second = await turn("Hello, I am Ada."), await turn("What is my name?")
    state = await cli(temporal_env, "workflow", "query", "--workflow-id", sid, "--name", STATE_QUERY)
    turns = await cli(temporal_env, "workflow", "query", "--workflow-id", sid, "--name", TURNS_QUERY)
    closed = await cli(
        temporal_env,
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        sid,
        "--name",
        CLOSE_UPDATE,
        "--input",
        json.dumps({"reason": "done"}),
    )
    outcome = await cli(temporal_env, "workflow", "result", "--workflow-id", sid)

    assert (first["updateResult"]["turn"], first["updateResult"]["output"]) == (1, "Noted.")
    assert (second["updateResult"]["turn"], second["updateResult"]["output"], second["updateResult"]["session_id"]) == (
        2,
        "You are Ada.",
        sid,
    )
    assert (state["queryResult"][0]["status"], state["queryResult"][0]["turns"]) == ("idle", 2)
    assert [t["input"] for t in turns["queryResult"][0]] == ["Hello, I am Ada.", "What is my name?"]
    assert closed["result"]["status"] == "closed"
    assert outcome["result"]["reason"] == "done" and outcome["result"]["turns"] == 2
