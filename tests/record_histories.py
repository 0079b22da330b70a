"""Records the histories in tests/histories/ (run by hand, never collected as tests).

    .venv/bin/python -m pytest -q tests/record_histories.py

Run it only from a release's code, before changing what workflows issue: the
files are what runs in flight look like, and tests/test_replay.py replays them
against every later build. Each scenario crosses a path that side-effect
keys, delivery policies and budget reservations touch.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from agentsteps.contracts import AgentInput, AgentSpec, LLMConfig
from agentsteps.contracts.monitor import MonitorInput
from agentsteps.contracts.names import AGENT_WORKFLOW, MONITOR_WORKFLOW, PIPELINE_WORKFLOW
from agentsteps.demos.monitor import assigned_issues, monitor_worker, nudge_script, tracker_client, tracker_server
from agentsteps.worker import running_worker

from mcp_support import new_token
from monitor_support import make_spec as monitor_spec, seed_tracker

HISTORIES = Path(__file__).resolve().parent / "histories"
MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=256, context_window=16_000)


async def _save(handle, name: str) -> None:
    await handle.result()
    HISTORIES.mkdir(exist_ok=True)
    history = await handle.fetch_history()
    (HISTORIES / f"{name}.json").write_text(json.dumps({"workflow_id": handle.id, "history": json.loads(history.to_json())}))


async def test_record_agent_tool_mode(client, settings, scripted):
    scripted.set_script({"rules": [
        {"match": {"role": "user"}, "reply": {"tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "send_notification", "arguments": {"recipient": "kim", "message": "rain in Paris"}},
        ]}},
        {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "Told Kim."}},
    ]})
    spec = AgentSpec(name="rec", model=MODEL, tools=["get_weather", "send_notification"])
    async with running_worker(client, settings):
        handle = await client.start_workflow(
            AGENT_WORKFLOW, AgentInput(spec=spec, input="tell kim the weather"), id=f"rec-tools-{uuid.uuid4().hex[:6]}",
            task_queue=settings.task_queue,
        )
        await _save(handle, "agent_tool_mode")


FAILING = 'await send_notification(recipient="kim", message="hello")\nraise ValueError("oops")\n'
WORKING = (
    'd = await send_notification(recipient="kim", message="hello")\n'
    'w = await llm("say hi")\n{"id": d["notification_id"], "w": w}\n'
)


async def test_record_agent_code_mode(client, settings, scripted):
    scripted.set_script({"replies": [
        {"content": f"```python\n{FAILING}```"},
        {"content": f"```python\n{WORKING}```"},
        {"content": "hi"},
    ]})
    spec = AgentSpec(name="rec", model=MODEL, tools=["send_notification"], mode="code", max_steps=4)
    async with running_worker(client, settings):
        handle = await client.start_workflow(
            AGENT_WORKFLOW, AgentInput(spec=spec, input="notify kim"), id=f"rec-code-{uuid.uuid4().hex[:6]}",
            task_queue=settings.task_queue,
        )
        await _save(handle, "agent_code_mode")


async def test_record_pipeline(client, settings, scripted):
    from agentsteps.examples.support_tools import build_registry
    from test_pipeline_workflow import REPLY, UPDATE, example_input, rules

    scripted.set_script(rules([{"json": UPDATE}], [{"json": REPLY}]))
    async with running_worker(client, settings, registry=build_registry(settings)):
        handle = await client.start_workflow(
            PIPELINE_WORKFLOW, example_input(), id=f"rec-pipe-{uuid.uuid4().hex[:6]}", task_queue=settings.task_queue,
        )
        await _save(handle, "pipeline")


async def test_record_monitor(client, settings, scripted, tmp_path):
    db, now = seed_tracker(tmp_path, issues=30)
    scripted.set_script(nudge_script(assigned_issues(db)))
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    try:
        async with monitor_worker(client, settings, mcp):
            handle = await client.start_workflow(
                MONITOR_WORKFLOW, MonitorInput(spec=monitor_spec(), as_of=now), id=f"rec-mon-{uuid.uuid4().hex[:6]}",
                task_queue=settings.task_queue,
            )
            await _save(handle, "monitor")
    finally:
        await mcp.aclose()
