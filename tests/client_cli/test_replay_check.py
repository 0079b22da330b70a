"""``agentsteps replay --check``: recorded runs against this build, from a server or a folder.

Real dev server, real worker and scripted model for the recorded runs; the
changed build is a real workflow class with an ungated timer (tests/support/changed_build.py).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import shutil
import uuid
from pathlib import Path

import pytest
from agent_support import make_spec, run_agent, weather_then_answer
from changed_build import AgentWorkflowWithUngatedTimer
from cli_json_support import pinned

from agentsteps.cli.json_output import REPLAY_CHECK
from agentsteps.cli.replay import EXIT_FAILED, EXIT_INVALID, EXIT_OK, replay_command
from agentsteps.client.replay_check import (
    _COMMAND_EVENTS,
    check_histories,
    describe_event,
    fetch_history,
    history_files,
    server_histories,
)
from agentsteps.contracts.errors import HistoryUnavailableError, InvalidSpecError
from agentsteps.worker import ENGINE_SANDBOX, build_data_converter, workflows

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


def args(**given) -> argparse.Namespace:
    base = dict(
        workflow_ids=[],
        check=True,
        histories=None,
        workflow_type=None,
        query=None,
        limit=50,
        spec=None,
        model=None,
        allow_tools="",
        max_differ=0,
        json=False,
        no_worker=False,
    )
    base.update(given)
    return argparse.Namespace(**base)


async def run(settings, **given) -> tuple[int, str]:
    out = io.StringIO()
    code = await replay_command(settings, args(**given), out)
    return code, out.getvalue()


async def test_the_recorded_histories_folder_passes_on_this_build(settings):
    code, text = await run(settings, histories=str(HISTORIES), json=True)
    assert code == EXIT_OK, text
    body = pinned(text, REPLAY_CHECK)
    assert body["ok"] is True
    assert body["replayed"] == len(list(HISTORIES.glob("*.json"))) and body["failed"] == 0


async def test_a_build_with_an_ungated_command_change_fails_naming_the_event(settings):
    files = history_files(HISTORIES)
    findings = await check_histories(
        files,
        workflows=[AgentWorkflowWithUngatedTimer],
        data_converter=build_data_converter(settings),
        workflow_runner=ENGINE_SANDBOX,
    )
    agent = [f for f in findings if f.workflow_type == "AgentWorkflow"]
    assert agent and not any(f.ok for f in agent)
    tool_mode = next(f for f in agent if f.workflow_id == "tool_mode")
    history = dict(files)[str(HISTORIES / "tool_mode.json")]
    first_command = next(e for e in history.events if e.HasField("activity_task_scheduled_event_attributes"))
    # The recorded run's first command was the tools.describe activity; the changed build starts a timer there.
    assert tool_mode.event_id == first_command.event_id
    assert tool_mode.event == "ActivityTaskScheduled tools.describe"
    assert "workflow.patched" in tool_mode.hint and "Nondeterminism" in tool_mode.error


async def test_recent_runs_from_the_server_pass_on_this_build_and_fail_on_the_changed_one(engine, scripted, client):
    scripted.set_script(weather_then_answer())
    ids = []
    for _ in range(2):
        result = await run_agent(client, engine.task_queue, make_spec())
        assert result.status == "completed"
    query = f'TaskQueue="{engine.task_queue}"'
    for _ in range(50):  # visibility trails the runs by a moment
        ids = [execution.id async for execution in client.list_workflows(query)]
        if len(ids) == 2:
            break
        await asyncio.sleep(0.1)
    on_this_server = engine.settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
    code, text = await run(on_this_server, query=query)
    assert code == EXIT_OK, text
    assert "2 histories replayed: all replay on this build" in text

    findings = await check_histories(
        server_histories(client, query, 10),
        workflows=[AgentWorkflowWithUngatedTimer],
        data_converter=build_data_converter(engine.settings),
        workflow_runner=ENGINE_SANDBOX,
    )
    assert {f.workflow_id for f in findings} == set(ids) and not any(f.ok for f in findings)
    for f in findings:
        history = await fetch_history(client, f.workflow_id)
        # A new run's first commands are its patch markers: the timer now stands where the first of them was.
        first_command = next(e for e in history.events if e.event_type in _COMMAND_EVENTS)
        assert (f.event_id, f.event) == (first_command.event_id, describe_event(first_command))
        assert f.event.startswith("MarkerRecorded")


async def test_the_cli_fails_with_a_readable_report_on_a_folder_with_a_non_deterministic_history(settings, tmp_path):
    # A real history whose recorded commands this build never issues: the first two activities swapped.
    data = json.loads((HISTORIES / "tool_mode.json").read_text())
    scheduled = [e for e in data["events"] if "activityTaskScheduledEventAttributes" in e]
    first, second = (e["activityTaskScheduledEventAttributes"]["activityType"] for e in scheduled[:2])
    first["name"], second["name"] = second["name"], first["name"]
    (tmp_path / "tampered.json").write_text(json.dumps(data))
    shutil.copy(HISTORIES / "pipeline.json", tmp_path / "pipeline.json")
    code, text = await run(settings, histories=str(tmp_path))
    assert code == EXIT_FAILED
    assert "tampered" in text and "NON-DETERMINISTIC at event" in text and "workflow.patched" in text
    assert "pipeline" in text and "2 histories replayed: 1 do not replay; do not deploy this build" in text

    code, text = await run(settings, histories=str(tmp_path), json=True)
    body = pinned(text, REPLAY_CHECK)
    assert code == EXIT_FAILED and (body["ok"], body["replayed"], body["failed"]) == (False, 2, 1)
    tampered = next(h for h in body["histories"] if not h["ok"])
    assert tampered["source"].endswith("tampered.json") and "workflow.patched" in tampered["hint"]
    assert isinstance(tampered["event_id"], int) and tampered["event"].startswith("ActivityTaskScheduled")


async def test_a_run_the_server_no_longer_keeps_is_a_clear_error(client):
    with pytest.raises(HistoryUnavailableError, match="retention"):
        await fetch_history(client, f"gone-{uuid.uuid4().hex}")


@pytest.mark.parametrize("content", ["not json", "{}", '{"events": [{"eventId": "1", "eventType": "TimerFired"}]}'])
def test_a_file_that_is_not_a_history_is_a_typed_error_naming_it(tmp_path, content):
    (tmp_path / "junk.json").write_text(content)
    with pytest.raises(InvalidSpecError, match="junk.json"):
        history_files(tmp_path)


async def test_bad_arguments_exit_2(settings, tmp_path):
    with pytest.raises(InvalidSpecError, match="no \\*.json"):
        await run(settings, histories=str(tmp_path))
    with pytest.raises(InvalidSpecError, match="unknown workflow type"):
        await run(settings, workflow_type="NoSuchWorkflow")
    assert (await run(settings, limit=0))[0] == EXIT_INVALID
    assert (await run(settings, workflow_ids=["x"], histories=str(HISTORIES)))[0] == EXIT_INVALID
