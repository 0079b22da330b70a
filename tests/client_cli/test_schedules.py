"""Schedules from files against the real dev server: apply, update, list, pause, resume, trigger, bad files."""

from __future__ import annotations

import argparse
import asyncio
import io
import uuid
from contextlib import redirect_stdout
from datetime import timedelta
from pathlib import Path

import pytest
from cli_json_support import pinned
from mcp_support import new_token
from monitor_support import MODEL, make_spec, nudge_comments, seed_tracker, stalled_by_sql
from temporalio.client import ScheduleActionStartWorkflow, ScheduleOverlapPolicy
from temporalio.service import RPCError, RPCStatusCode

from agentsteps.cli.json_output import SCHEDULE_CHANGES, SCHEDULE_LIST
from agentsteps.cli.schedule import schedule_command
from agentsteps.client.schedules import (
    apply_schedules,
    list_schedules,
    load_schedule_files,
    pause,
    resume,
    trigger,
)
from agentsteps.contracts.config.schedules import ScheduleChange, parse_schedule_file
from agentsteps.contracts.errors import ScheduleFileError, ScheduleNotFoundError
from agentsteps.contracts.monitor import MonitorReport
from agentsteps.contracts.names import MONITOR_WORKFLOW
from agentsteps.demos.monitor import assigned_issues, monitor_worker, nudge_script, tracker_client, tracker_server

REPO = Path(__file__).resolve().parents[2]


def monitor_file(schedule_id: str, task_queue: str = "agentsteps", *, every: str = "1h", extra: str = "") -> str:
    return f"""
id = "{schedule_id}"
workflow = "StalledTicketMonitor"
task_queue = "{task_queue}"
every = "{every}"
catchup_window = "2h"
{extra}
[input.spec]
name = "{schedule_id}"
lead = "lead.core"
stalled_after_days = 7
[input.spec.model]
model = "{MODEL}"
max_tokens = 256
context_window = 16000
"""


@pytest.fixture
def schedule_id():
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def cleanup(client):
    ids: list[str] = []
    yield ids
    for schedule_id in ids:
        await client.get_schedule_handle(schedule_id).delete()


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


def test_the_shipped_schedule_file_is_valid_hourly_skip_and_bounded_catch_up():
    [shipped] = load_schedule_files(REPO / "deploy" / "schedules")
    assert shipped.id == "stalled-tickets" and shipped.workflow == MONITOR_WORKFLOW
    assert shipped.every == timedelta(hours=1)
    assert shipped.overlap == "skip"
    assert timedelta(0) < shipped.catchup_window <= timedelta(days=1)
    assert shipped.workflow_input().spec.stalled_after_days >= 1


async def test_apply_creates_then_is_idempotent_then_updates_a_changed_file_keeping_the_pause(
    client, tmp_path, schedule_id, cleanup
):
    cleanup.append(schedule_id)
    write(tmp_path, schedule_id, monitor_file(schedule_id))
    assert await apply_schedules(client, tmp_path) == [ScheduleChange(id=schedule_id, outcome="created")]
    assert await apply_schedules(client, tmp_path) == [ScheduleChange(id=schedule_id, outcome="unchanged")]

    described = await client.get_schedule_handle(schedule_id).describe()
    schedule = described.schedule
    assert [i.every for i in schedule.spec.intervals] == [timedelta(hours=1)]
    assert schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert schedule.policy.catchup_window == timedelta(hours=2)
    assert isinstance(schedule.action, ScheduleActionStartWorkflow)
    assert schedule.action.workflow == MONITOR_WORKFLOW
    assert schedule.action.task_queue == "agentsteps"
    [arg] = schedule.action.args
    assert described.data_converter.payload_converter.from_payloads([arg])[0]["spec"]["lead"] == "lead.core"

    await pause(client, schedule_id, "maintenance")
    write(tmp_path, schedule_id, monitor_file(schedule_id, every="30m"))
    assert await apply_schedules(client, tmp_path) == [ScheduleChange(id=schedule_id, outcome="updated")]
    assert await apply_schedules(client, tmp_path) == [ScheduleChange(id=schedule_id, outcome="unchanged")]
    described = await client.get_schedule_handle(schedule_id).describe()
    assert [i.every for i in described.schedule.spec.intervals] == [timedelta(minutes=30)]
    assert described.schedule.state.paused and described.schedule.state.note == "maintenance"


async def test_pause_resume_and_list(client, tmp_path, schedule_id, cleanup):
    cleanup.append(schedule_id)
    write(tmp_path, schedule_id, monitor_file(schedule_id))
    await apply_schedules(client, tmp_path)
    handle = client.get_schedule_handle(schedule_id)

    await pause(client, schedule_id)
    assert (await handle.describe()).schedule.state.paused
    await resume(client, schedule_id)
    assert not (await handle.describe()).schedule.state.paused

    for _ in range(100):  # the schedule list comes from visibility, which lags a little
        rows = {row.id: row for row in await list_schedules(client)}
        if schedule_id in rows:
            break
        await asyncio.sleep(0.1)
    row = rows[schedule_id]
    assert row.workflow == MONITOR_WORKFLOW and row.managed and not row.paused
    assert row.next_run is not None

    with pytest.raises(ScheduleNotFoundError):
        await pause(client, f"missing-{schedule_id}")
    with pytest.raises(ScheduleNotFoundError):
        await trigger(client, f"missing-{schedule_id}")


async def test_trigger_runs_one_monitor_tick_that_nudges_the_stalled_issues(
    client, settings, scripted, tmp_path, schedule_id, cleanup
):
    db, now = seed_tracker(tmp_path, issues=30)
    scripted.set_script(nudge_script(assigned_issues(db)))
    # Before the tick: nudges bump updated_at. The tick's own "now" is seconds later, which
    # moves the cutoff past no seeded timestamp in practice.
    expected = stalled_by_sql(db, make_spec(), now)
    cleanup.append(schedule_id)
    # No as_of: a scheduled tick uses workflow.now(), which is the tracker's "now" too.
    write(tmp_path / "schedules", schedule_id, monitor_file(schedule_id, settings.task_queue, every="1d"))
    await apply_schedules(client, tmp_path / "schedules")
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    try:
        async with monitor_worker(client, settings, mcp):
            started = await trigger(client, schedule_id)
            handle = client.get_schedule_handle(schedule_id)
            for _ in range(100):
                recent = (await handle.describe()).info.recent_actions
                if recent:
                    break
                await asyncio.sleep(0.1)
            workflow_id = recent[0].action.workflow_id
            report = await client.get_workflow_handle(workflow_id, result_type=MonitorReport).result()
    finally:
        await mcp.aclose()
    assert workflow_id.startswith(schedule_id) and started == workflow_id
    assert report.stalled_ids == expected and report.nudged == expected
    assert sorted(nudge_comments(db)) == sorted(expected)


@pytest.mark.parametrize(
    "change, field",
    [
        (('every = "1h"', 'every = "1x"'), "every"),
        (('every = "1h"', ""), "every"),
        (('every = "1h"', 'every = "1h"\ncron = "0 * * * *"'), "every"),
        (('catchup_window = "2h"', 'catchup_window = "30d"'), "catchup_window"),
        (('workflow = "StalledTicketMonitor"', 'workflow = "NoSuchWorkflow"'), "workflow"),
        (('task_queue = "agentsteps"', 'task_queue = "agentsteps"\noverlap = "sometimes"'), "overlap"),
        (('task_queue = "agentsteps"', 'task_queue = "agentsteps"\nbogus = 1'), "bogus"),
        (("stalled_after_days = 7", "stalled_after_days = 0"), "input.spec.stalled_after_days"),
        (('lead = "lead.core"', ""), "input.spec.lead"),
        (('id = "x"', 'id = "has space"'), "id"),
        (("[input.spec]", "[input.spec\n"), "$"),
    ],
)
def test_a_malformed_schedule_file_gives_a_typed_error_naming_the_field(change, field):
    old, new = change
    text = monitor_file("x")
    assert old in text
    with pytest.raises(ScheduleFileError) as caught:
        parse_schedule_file(text.replace(old, new), name="x", origin="deploy/schedules/x.toml")
    assert caught.value.field == field
    assert str(caught.value).startswith(f"deploy/schedules/x.toml: {field}: ")
    assert caught.value.violations[0].path == field


async def test_one_bad_file_stops_apply_before_anything_changes(client, tmp_path, schedule_id):
    write(tmp_path, "a-good", monitor_file(schedule_id))
    write(tmp_path, "b-bad", monitor_file("other").replace('every = "1h"', 'every = "soon"'))
    with pytest.raises(ScheduleFileError) as caught:
        await apply_schedules(client, tmp_path)
    assert caught.value.file.endswith("b-bad.toml") and caught.value.field == "every"
    with pytest.raises(RPCError) as missing:
        await client.get_schedule_handle(schedule_id).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


def test_two_files_with_one_schedule_id_are_rejected(tmp_path):
    write(tmp_path, "one", monitor_file("same"))
    write(tmp_path, "two", monitor_file("same"))
    with pytest.raises(ScheduleFileError) as caught:
        load_schedule_files(tmp_path)
    assert caught.value.field == "id"


async def test_the_cli_applies_and_lists_schedules(client, temporal_env, tmp_path, schedule_id, cleanup, monkeypatch):
    cleanup.append(schedule_id)
    write(tmp_path, schedule_id, monitor_file(schedule_id))
    monkeypatch.setenv("TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    config = tmp_path.parent / f"{tmp_path.name}-config.toml"
    config.write_text("")  # an empty config: no stray ./agentsteps.toml can leak in
    monkeypatch.setenv("AGENTSTEPS_CONFIG", str(config))

    def run(*argv: str) -> tuple[int, str]:
        parser = argparse.ArgumentParser()
        from agentsteps.cli.arguments import schedule_arguments as configure_parser

        configure_parser(parser)
        out = io.StringIO()
        with redirect_stdout(out):
            status = schedule_command(parser.parse_args(argv))
        return status, out.getvalue()

    assert await asyncio.to_thread(run, "apply", "--dir", str(tmp_path)) == (0, f"created {schedule_id}\n")
    assert await asyncio.to_thread(run, "apply", "--dir", str(tmp_path)) == (0, f"unchanged {schedule_id}\n")
    assert (await asyncio.to_thread(run, "pause"))[0] == 2
    assert await asyncio.to_thread(run, "pause", schedule_id) == (0, f"paused {schedule_id}\n")
    for _ in range(100):
        status, text = await asyncio.to_thread(run, "list", "--json")
        rows = {row["id"]: row for row in pinned(text, SCHEDULE_LIST)["schedules"]}
        if schedule_id in rows:
            break
        await asyncio.sleep(0.1)
    assert status == 0 and rows[schedule_id]["paused"] is True

    status, text = await asyncio.to_thread(run, "resume", schedule_id, "--json")
    assert status == 0 and pinned(text, SCHEDULE_CHANGES)["changes"] == [{"id": schedule_id, "outcome": "resumed"}]
    status, text = await asyncio.to_thread(run, "apply", "--dir", str(tmp_path), "--json")
    assert status == 0 and pinned(text, SCHEDULE_CHANGES)["changes"] == [{"id": schedule_id, "outcome": "unchanged"}]
