"""MCP tools through the ``tools.*`` activities on a real Temporal dev server, against real MCP servers.

The worker's MCP pool is a tool source of ``tools.describe`` / ``tools.call``,
the only way a workflow reaches an MCP server.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import timedelta

import pytest
from mcp_support import (
    free_port,
    hostile,
    http_tracker,
    http_tracker_process,
    make_client,
    new_token,
    seeded_db,
    stdio_tracker,
    tool_call,
)
from pydantic import BaseModel
from secret_scan import decoded_payloads
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentsteps.activities.mcp import McpActivities
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts.llm.tools import ToolCallInput, ToolCallResult, ToolSchema, ToolsDescribeInput, result_value
from agentsteps.contracts.names import TOOLS_CALL, TOOLS_DESCRIBE
from agentsteps.telemetry.metrics import TOOL_CALLS


class ProbeInput(BaseModel):
    describe: list[str]
    calls: list[ToolCallInput]
    max_attempts: int = 3


class ProbeOutput(BaseModel):
    tools: list[ToolSchema]
    results: list[ToolCallResult]
    catalog: list[str] = []
    """Every tool the worker discovered (what ``tools.describe`` answers from); filled in after the run."""


@workflow.defn(name="McpProbeWorkflow")
class McpProbeWorkflow:
    """Discovery at run start, then each call as its own activity: the shape the agent loop uses."""

    @workflow.run
    async def run(self, input: ProbeInput) -> ProbeOutput:
        retry = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=input.max_attempts)
        tools = await workflow.execute_activity(
            TOOLS_DESCRIBE,
            ToolsDescribeInput(names=input.describe),
            result_type=list[ToolSchema],
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=retry,
        )
        results = []
        for call in input.calls:
            results.append(
                await workflow.execute_activity(
                    TOOLS_CALL,
                    call,
                    result_type=ToolCallResult,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=retry,
                )
            )
        return ProbeOutput(tools=tools, results=results)


@pytest.fixture(scope="module")
def token() -> str:
    return new_token()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return seeded_db(tmp_path_factory.mktemp("tickets-act"), issues=200)


async def _run(client, servers, secrets, probe: ProbeInput) -> tuple[ProbeOutput | BaseException, str]:
    """Run the probe on a fresh worker; returns its output (or failure) and the history as JSON."""
    task_queue = f"mcp-{uuid.uuid4().hex[:8]}"
    mcp = McpActivities(make_client(servers, secrets))
    tools = ToolActivities(ToolRegistry(), [mcp.source()])
    workflow_id = f"mcp-probe-{uuid.uuid4().hex[:8]}"
    try:
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[McpProbeWorkflow],
            activities=[tools.describe, tools.call],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            try:
                outcome: ProbeOutput | BaseException = await client.execute_workflow(
                    McpProbeWorkflow.run,
                    probe,
                    id=workflow_id,
                    task_queue=task_queue,
                    execution_timeout=timedelta(seconds=90),
                )
            except WorkflowFailureError as exc:
                outcome = exc
            history = await client.get_workflow_handle(workflow_id).fetch_history()
        if isinstance(outcome, ProbeOutput):
            outcome.catalog = sorted(await tools.catalog())
    finally:
        await mcp.aclose()
    # Payloads decoded: in to_json() they are base64, and a search of it sees nothing inside them.
    as_dict = history.to_json_dict()
    return outcome, json.dumps(as_dict) + "\n" + "\n".join(decoded_payloads(as_dict))


def _call(server: str, name: str, args: dict, key: str | None = None) -> ToolCallInput:
    # tools.call finds the server from the tool's catalog entry (its source, "mcp:<server>").
    return tool_call(name, args, key=key)


TRACKER_TOOLS = ["add_comment", "get_issue", "list_issues", "update_issue"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_discovery_and_calls_run_as_activities(client, db, token, transport):
    secrets = {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token}
    calls = [
        _call("tickets", "list_issues", {"state": "open", "limit": 5}),
        _call("tickets", "get_issue", {"id": "API-1"}),
    ]
    before = TOOL_CALLS.labels(tool="get_issue", outcome="ok")._value.get()
    if transport == "stdio":
        out, history = await _run(
            client, {"tickets": stdio_tracker(db)}, secrets, ProbeInput(describe=TRACKER_TOOLS, calls=calls)
        )
    else:
        port = free_port()
        with http_tracker_process(db, port, token):
            out, history = await _run(
                client, {"tickets": http_tracker(port)}, secrets, ProbeInput(describe=TRACKER_TOOLS, calls=calls)
            )
    assert isinstance(out, ProbeOutput), out
    assert out.catalog == TRACKER_TOOLS  # everything the server offers, discovered in the activity
    assert {t.name for t in out.tools} == {"list_issues", "get_issue", "add_comment", "update_issue"}
    assert all(t.output_schema and t.source == "mcp:tickets" for t in out.tools)
    listed, issue = out.results
    assert len(result_value(listed)["issues"]) == 5 and result_value(issue)["id"] == "API-1"
    assert TOOL_CALLS.labels(tool="get_issue", outcome="ok")._value.get() == before + 1
    # The credential stays in the worker: not in inputs, results or anything else in history.
    assert token not in history


async def test_a_rejected_credential_fails_the_activity_without_retrying(client, db, token):
    out, history = await _run(
        client,
        {"tickets": stdio_tracker(db)},
        {"TICKETS_API_TOKEN": "not-the-token", "TRACKER_EXPECTS": token},
        ProbeInput(describe=TRACKER_TOOLS, calls=[], max_attempts=5),
    )
    assert isinstance(out, WorkflowFailureError)
    assert isinstance(out.cause, ActivityError)
    cause = out.cause.cause
    assert isinstance(cause, ApplicationError) and cause.type == "McpAuthError" and cause.non_retryable
    assert history.count("ACTIVITY_TASK_STARTED") + history.count("ActivityTaskStarted") >= 1
    assert '"attempt": 2' not in history
    assert token not in history


async def test_a_server_dying_mid_call_is_retried_by_temporal_on_a_new_process(client, tmp_path):
    marker = tmp_path / "died"
    out, history = await _run(
        client,
        {"rogue": hostile()},
        {"HOSTILE_TOKEN": "x" * 8, "HOSTILE_MARKER": str(marker)},
        ProbeInput(describe=["die_once"], calls=[_call("rogue", "die_once", {})]),
    )
    assert isinstance(out, ProbeOutput), out
    [result] = out.results
    assert result.content and result_value(result)["pid"] != int(marker.read_text())
    assert "McpUnavailableError" in history  # the first attempt's failure, recorded on the retry


async def test_a_repeated_write_with_the_same_key_posts_one_comment(client, db, token):
    """The same activity input twice is what a retry after a lost completion looks like."""
    write = _call(
        "tickets",
        "add_comment",
        {"issue_id": "WEB-2", "body": "Nudge: any progress?", "author": "agentsteps-monitor"},
        key=f"run-{uuid.uuid4().hex}/c1",
    )

    def count() -> int:
        conn = sqlite3.connect(db)
        try:
            return conn.execute("SELECT COUNT(*) FROM comments WHERE issue_id='WEB-2'").fetchone()[0]
        finally:
            conn.close()

    before = count()
    out, _ = await _run(
        client,
        {"tickets": stdio_tracker(db)},
        {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token},
        ProbeInput(describe=["add_comment"], calls=[write, write]),
    )
    assert isinstance(out, ProbeOutput), out
    first, second = out.results
    assert result_value(first) == result_value(second) and not first.is_error
    assert count() == before + 1


async def test_an_output_schema_violation_reaches_the_workflow_as_an_error_result(client, tmp_path):
    out, _ = await _run(
        client,
        {"rogue": hostile()},
        {"HOSTILE_TOKEN": "x" * 8, "HOSTILE_MARKER": str(tmp_path / "m")},
        ProbeInput(
            describe=["bad_output", "fails"], calls=[_call("rogue", "bad_output", {}), _call("rogue", "fails", {})]
        ),
    )
    assert isinstance(out, ProbeOutput), out
    violation, failure = out.results
    assert violation.is_error and "tool_output_invalid" in violation.content
    assert failure.is_error and "widget is on fire" in failure.content
