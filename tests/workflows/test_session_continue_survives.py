"""A continue-as-new never ends a session: the new run carries its tool schemas instead of describing again.

Before: every continued run described its tools at once, with no handling, so
an MCP server down at that moment (``McpServerDownError`` past its
``give_up_seconds``) failed the whole session workflow: conversation gone, and
the next turn met a closed session.
"""

from __future__ import annotations

import asyncio

import pytest
from fleet_support import FLEET_SERVER, Control, eventually, fleet_server, unique
from mcp_support import child_pids, kill, write_mcp_config
from session_support import failure_of, session_id, turn
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError

from agentsteps.client.sessions import session_handle, session_state
from agentsteps.contracts.errors import AgentStepsError
from agentsteps.contracts.session import SessionConfig
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.worker import build_mcp, running_worker

GIVE_UP = 2.0
BREAKER = {"failures": 2, "open_seconds": 0.5, "max_open_seconds": 1}
"""A down server is probed again within a second (5 s, doubling, by default): the server back up is seen sooner."""
SHORT = SessionConfig(continue_after_events=100)
RETRY = ActivityPolicy(
    start_to_close_seconds=10, max_attempts=100, initial_interval_seconds=0.2, maximum_interval_seconds=0.5
)
SCRIPT = {
    "rules": [
        {
            "match": {"role": "user", "contains": "[echo]"},
            "reply": {"tool_calls": [{"name": "flaky_echo", "arguments": {"text": "hi"}}]},
        },
        {"match": {"tool_result_for": "flaky_echo"}, "reply": {"content": "echo ok"}},
        {"match": {"contains": "which word", "any_contains": "remember the word zebra"}, "reply": {"content": "zebra"}},
    ],
    "default": {"content": "Noted."},
}


def program_reply(code: str) -> dict:
    return {"content": f"Here is the program.\n```python\n{code}```\n"}


# Code mode: the word is a variable, the echo a call from the program.
CODE_SCRIPT = {
    "rules": [
        {
            "match": {"contains": "remember the word zebra"},
            "reply": program_reply('word = "zebra"\nr = await flaky_echo(text="hi")\n"echo ok"\n'),
        },
        {"match": {"contains": "[echo]"}, "reply": program_reply('r = await flaky_echo(text="hi")\n"echo ok"\n')},
        {"match": {"contains": "which word"}, "reply": program_reply("word\n")},
        {"match": {"role": "user"}, "reply": program_reply("1 + 1\n")},
    ]
}


@pytest.mark.parametrize("mode", ["tools", "code"])
async def test_an_mcp_server_down_at_continue_as_new_fails_only_the_next_turn(
    client, settings, scripted, tmp_path, mode
):
    scripted.set_script(SCRIPT if mode == "tools" else CODE_SCRIPT)
    code = {"mode": "code", "max_steps": 4} if mode == "code" else {}
    control = Control(tmp_path / "flaky")
    name = unique("flaky")
    config = write_mcp_config(
        tmp_path / "agentsteps.toml",
        {
            name: fleet_server(
                control,
                tool_prefix="flaky_",
                give_up_seconds=GIVE_UP,
                catalog_ttl_seconds=1,
                timeouts={"connect_seconds": 5, "call_seconds": 1, "list_seconds": 2},
                breaker=BREAKER,
            ),
        },
    )
    configured = settings.model_copy(update={"config_file": config})
    mcp = build_mcp(configured)
    sid = session_id()

    async def send(text: str):
        return await turn(engine, sid, text, config=SHORT, tools=["flaky_echo"], tool_policy=RETRY, **code)

    async with running_worker(client, configured, mcp=mcp):
        engine = type("E", (), {"client": client, "task_queue": configured.task_queue})()
        first = await send("remember the word zebra [echo]")
        # The server goes down, and stays down while the session continues as new.
        control.set("down")
        for pid in child_pids(FLEET_SERVER):
            kill(pid)
        await eventually(lambda: mcp.fleet.report()[name]["state"] != "up", what="the server is seen down")
        for n in range(40):
            await send(f"note {n}")
            if (await session_state(client, sid)).continued:
                break
        assert (await session_state(client, sid)).continued >= 1
        await asyncio.sleep(GIVE_UP + 2)  # long past the point where describing again would have given up
        status = (await session_handle(client, sid).describe()).status

        with pytest.raises(AgentStepsError) as down:
            await send("[echo] again")
        alive = await session_state(client, sid)

        control.set("down", on=False)
        await eventually(lambda: mcp.fleet.report()[name]["state"] == "up", timeout=30, what="the server is back")
        back = await send("[echo] once more")
        remembered = await send("which word did I ask you to remember?")

    assert first.output == "echo ok"
    assert status is WorkflowExecutionStatus.RUNNING  # the continued run did not fail
    failure = failure_of(down.value)
    assert failure.type == "McpServerDownError" and name in failure.message
    assert alive.status == "idle"
    assert back.output == "echo ok" and not back.steps[0].tool_calls[0].is_error
    # The conversation (tool mode) or the variable (code mode) crossed the continue-as-new intact.
    assert remembered.output == "zebra"
    assert remembered.turn == alive.turns + 2


async def test_a_failed_describe_fails_that_turn_and_the_session_goes_on(client, settings, scripted, tmp_path):
    """Describing is lazy: a new session whose server is down fails its first turn, typed, and stays open."""
    scripted.set_script(SCRIPT)
    control = Control(tmp_path / "flaky")
    control.set("down")
    name = unique("flaky")
    config = write_mcp_config(
        tmp_path / "agentsteps.toml",
        {
            name: fleet_server(
                control,
                tool_prefix="flaky_",
                give_up_seconds=GIVE_UP,
                timeouts={"connect_seconds": 5, "call_seconds": 1, "list_seconds": 2},
                breaker=BREAKER,
            ),
        },
    )
    configured = settings.model_copy(update={"config_file": config})
    mcp = build_mcp(configured)
    sid = session_id()
    async with running_worker(client, configured, mcp=mcp):
        engine = type("E", (), {"client": client, "task_queue": configured.task_queue})()
        with pytest.raises(AgentStepsError) as down:
            await turn(engine, sid, "remember the word zebra [echo]", tools=["flaky_echo"], tool_policy=RETRY)
        state = await session_state(client, sid)
        control.set("down", on=False)
        await eventually(lambda: mcp.fleet.report()[name]["state"] == "up", timeout=30, what="the server is back")
        back = await turn(engine, sid, "[echo] now", tools=["flaky_echo"], tool_policy=RETRY)

    failure = failure_of(down.value)
    assert failure.type == "McpServerDownError" and name in failure.message
    assert (state.status, state.turns) == ("idle", 1)
    assert back.output == "echo ok" and back.turn == 2
