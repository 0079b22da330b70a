"""Every recorded history in tests/histories/ replays against this build's workflows.

A worker upgrade meets runs in flight: each file is a real run of an earlier
release (some taken while the run was paused on a tool). If a change to
workflow code makes a workflow issue different commands for the same history,
the Replayer raises a non-determinism error here, before any deployed worker
does. Gate such a change with ``workflow.patched(...)`` and keep the old file
(docs/upgrades.md). Recorded by tests/support/record_histories.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import WORKFLOWS
from agentsteps.worker import build_data_converter, workflows
from agentsteps.workflows.quota_gate import warm_tokenizer
from agentsteps.workflows.releases.registry import PATCHES

HISTORIES = Path(__file__).resolve().parents[1] / "histories"
FILES = sorted(HISTORIES.glob("*.json"))


def replayer() -> Replayer:
    # The worker's own data converter; payloads above the threshold would be read
    # from tests/histories/payloads (recorded histories keep everything inline).
    converter = build_data_converter(WorkerSettings(state_dir=HISTORIES))
    warm_tokenizer()  # as a worker with quotas and ``replay --check`` do: runs under a quota plan count prompts
    return Replayer(workflows=workflows(), data_converter=converter)


def load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def workflow_type(history: WorkflowHistory) -> str:
    return history.events[0].workflow_execution_started_event_attributes.workflow_type.name


def test_the_recorded_histories_cover_every_workflow_and_the_in_flight_shapes():
    names = {p.stem for p in FILES}
    assert {
        "tool_mode",
        "code_mode",
        "pipeline",
        "monitor_tick",
        "code_mode_paused_on_tool",
        "tool_mode_waiting_on_tool",
        "session_between_turns",
        "session_streamed_continued",
        "session_failed_turn_continued",
        "session_continued_carried_tools",
    } <= names
    assert {workflow_type(load(p)) for p in FILES} == set(WORKFLOWS)
    for path in FILES:
        assert "externalPayloads" not in path.read_text(), f"{path.name} needs the payload store"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
async def test_a_recorded_history_replays_against_this_build(path):
    result = await replayer().replay_workflow(load(path))
    assert result.replay_failure is None


async def test_each_history_replays_the_branch_of_each_patch_the_registry_says(monkeypatch):
    """``workflows/releases/registry.py`` tells a maintainer which files go with a patch: a history that asks
    an id and finds its marker replays the new branch (``marked``), one that finds none the old (``old_branch``)."""
    answers: list[tuple[str, str, bool]] = []
    ask = workflow.patched

    def recording(patch_id: str) -> bool:
        answer = ask(patch_id)
        answers.append((workflow.info().workflow_id, patch_id, answer))  # the history's file name (``load``)
        return answer

    monkeypatch.setattr(workflow, "patched", recording)
    replay = replayer()
    for path in FILES:
        await replay.replay_workflow(load(path))
    for patch in PATCHES:
        assert {name for name, asked, took in answers if asked == patch.id and took} == set(patch.marked), patch.id
        old = {name for name, asked, took in answers if asked == patch.id and not took}
        assert old == set(patch.old_branch), patch.id


def _reorder_first_two_activities(history_json: dict) -> dict:
    """The same run, except the first two scheduled activities swap names: what an ungated
    change to the order of a workflow's commands looks like to a worker replaying it."""
    scheduled = [e for e in history_json["events"] if "activityTaskScheduledEventAttributes" in e]
    first, second = (e["activityTaskScheduledEventAttributes"]["activityType"] for e in scheduled[:2])
    first["name"], second["name"] = second["name"], first["name"]
    return history_json


async def test_an_ungated_change_to_workflow_commands_fails_the_replay():
    data = json.loads((HISTORIES / "tool_mode.json").read_text())
    tampered = WorkflowHistory.from_json("tampered", _reorder_first_two_activities(data))
    result = await replayer().replay_workflow(tampered, raise_on_replay_failure=False)
    assert result.replay_failure is not None
    assert "nondeterminism" in str(result.replay_failure).lower() or "mismatch" in str(result.replay_failure).lower()
