"""Variables as memory: a code-mode session's REPL survives between turns, days and worker processes."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from code_mode_support import make_tickets, worker_settings
from process_support import kill, start_worker_process
from temporalio.testing import WorkflowEnvironment
from test_code_mode_e2e import code_spec, program_reply
from test_session_durability import test_server_binary

from agentsteps.client.dev_server import SERVER_STARTUP
from agentsteps.client.sessions import continue_session, session_state
from agentsteps.contracts.names import SESSION_WORKFLOW
from agentsteps.contracts.session import SessionInput
from agentsteps.storage.payload_store import build_payload_store

WORKER = Path(__file__).parents[1] / "support" / "code_mode_support.py"
FETCH = 'tickets = (await tickets_list("open", count=5000))["tickets"]\nlen(tickets)\n'
COUNT = 'stalled = [t["id"] for t in tickets if t["stalled"]]\n{"stalled": len(stalled), "first": stalled[:3]}\n'


async def test_turn_two_a_day_later_on_a_fresh_worker_answers_from_turn_ones_variable_without_tools(scripted, tmp_path):
    scripted.set_script(
        {
            "rules": [
                {"match": {"contains": "fetch every open ticket"}, "reply": program_reply(FETCH)},
                {
                    "match": {"contains": "how many are stalled", "any_contains": "tickets: list"},
                    "reply": program_reply(COUNT),
                },
            ]
        }
    )
    state_dir = tmp_path / "state"
    task_queue = f"memory-{uuid.uuid4().hex[:8]}"
    settings = worker_settings(state_dir, task_queue, scripted.url_openai)
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_binary(),
        test_server_startup_timeout=SERVER_STARTUP,
        data_converter=build_payload_store(settings).data_converter(),
    )
    sid = f"memory-{uuid.uuid4().hex[:8]}"
    address = env.client.service_client.config.target_host
    try:
        monday = start_worker_process(
            WORKER, address, task_queue, scripted.url_openai, state_dir, env={"AGENTSTEPS_TEST_NO_CACHE": "1"}
        )
        try:
            await env.client.start_workflow(
                SESSION_WORKFLOW, SessionInput(spec=code_spec()), id=sid, task_queue=task_queue
            )
            first = await continue_session(env.client, sid, "fetch every open ticket")
        finally:
            kill(monday)
        await env.sleep(timedelta(days=1))
        tuesday = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir)
        try:
            second = await continue_session(env.client, sid, "how many are stalled?")
            state = await session_state(env.client, sid)
        finally:
            kill(tuesday)
    finally:
        await env.shutdown()

    stalled = [t.id for t in make_tickets(5000) if t.stalled]
    assert first.status == "completed" and first.output == 5000
    assert [c.name for s in first.steps for c in s.tool_calls] == ["tickets.list"]
    assert second.output == {"stalled": len(stalled), "first": stalled[:3]}
    # Answered from the variable: no tool call at all in turn 2.
    assert [c for s in second.steps for c in s.tool_calls] == []
    assert {(v.name, v.type) for v in state.variables} >= {("tickets", "list"), ("stalled", "list")}
    # The model saw names and types, never the values.
    turn_two_prompt = scripted.requests[-1].body["messages"][-1]["content"]
    assert "tickets: list" in turn_two_prompt and "Steps to reproduce" not in turn_two_prompt
