"""Histories recorded by an earlier release replay against this build (runs in flight survive upgrades).

The files in tests/histories/ were recorded by tests/record_histories.py from
the code before side-effect keys, delivery policies, budget reservations and
the monitor's record retry were added; every change to the commands workflows
issue is gated with ``workflow.patched``, so these must replay unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agentsteps.worker import workflows

HISTORIES = sorted((Path(__file__).resolve().parent / "histories").glob("*.json"))


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays_without_nondeterminism(path: Path):
    recorded = json.loads(path.read_text())
    history = WorkflowHistory.from_json(recorded["workflow_id"], recorded["history"])
    replayer = Replayer(workflows=workflows(), data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"


def test_every_recorded_workflow_type_is_covered():
    types = {json.loads(p.read_text())["history"]["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"]
             for p in HISTORIES}
    assert types == {"AgentWorkflow", "PipelineWorkflow", "StalledTicketMonitor"}
