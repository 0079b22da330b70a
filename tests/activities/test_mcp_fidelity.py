"""MCP beyond plain text, against a real MCP server process (tests/support/mcp_rich_server.py).

Resource links, images, audio and annotations reach the model described and
programs typed; tools that require tasks are not offered; progress keeps a
long call heartbeating; a huge result is cut with a notice so the run goes on.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from agent_support import make_spec
from mcp_support import make_client, tool_call, write_mcp_config
from pydantic import BaseModel
from temporalio import workflow
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentsteps.activities.mcp import McpActivities
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.llm.tools import ToolCallResult, result_value
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.worker import running_worker
from agentsteps.workflows import calls

RICH = str(Path(__file__).parents[1] / "support" / "mcp_rich_server.py")
SERVER = {"transport": "stdio", "command": sys.executable, "args": [RICH]}


@pytest.fixture
async def rich():
    client = make_client({"rich": SERVER}, {})
    yield client
    await client.aclose()


async def test_a_resource_link_keeps_uri_name_title_description_and_annotations(rich):
    result = await rich.call_tool("rich", tool_call("link"))

    assert not result.is_error
    for kept in (
        "file:///reports/q3.pdf",
        "q3.pdf",
        "Q3 report",
        "Quarterly revenue report",
        "application/pdf",
        "48213 bytes",
        "for user",
        "priority 0.9",
    ):
        assert kept in result.content, kept
    link = result.structured[1]
    assert link == {
        "type": "resource_link",
        "uri": "file:///reports/q3.pdf",
        "name": "q3.pdf",
        "title": "Q3 report",
        "description": "Quarterly revenue report",
        "mime_type": "application/pdf",
        "size": 48213,
        "annotations": {"audience": ["user"], "priority": 0.9},
    }


@pytest.mark.parametrize(("tool", "mime", "size"), [("picture", "image/png", 1208), ("sound", "audio/wav", 3004)])
async def test_images_and_audio_become_a_described_placeholder_and_a_typed_value(rich, tool, mime, size):
    result = await rich.call_tool("rich", tool_call(tool))

    assert mime in result.content and f"{size} bytes" in result.content and "not shown" in result.content
    assert len(result.content) < 200  # no base64 for the model to choke on
    [value] = result.structured
    assert value["type"] == ("image" if tool == "picture" else "audio")
    assert (value["mime_type"], value["size_bytes"]) == (mime, size)
    # In code mode the program gets the typed value, not a string.
    assert calls.call_outcome(1, result).value == [value]


@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, '{"total": NaN}', "{not json"])
def test_a_tool_result_that_is_not_strict_json_reaches_a_program_as_text(content):
    # Deep nesting once raised RecursionError inside the workflow task, which then failed forever.
    outcome = calls.call_outcome(3, ToolCallResult(call_id="c3", name="report", content=content))

    assert (outcome.value, outcome.error) == (content, None)


async def test_a_tool_that_requires_tasks_is_not_offered_and_a_warning_names_it(rich, caplog):
    with caplog.at_level(logging.WARNING):
        names = {t.name for t in await rich.list_tools()}

    assert "needs_task" not in names
    assert "may_task" in names  # optional task support still works as a plain call
    assert any("needs_task" in r.getMessage() and "task" in r.getMessage() for r in caplog.records)
    refused = await rich.call_tool("rich", tool_call("needs_task"))
    assert refused.is_error and "not available" in refused.content


async def test_progress_notifications_are_published_as_heartbeat_details(rich):
    tools = ToolActivities(ToolRegistry(), [McpActivities(rich).source()])
    beats: list = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details[0])

    result = await env.run(tools.call, tool_call("slow", {"seconds": 1}))

    assert not result.is_error and result_value(result) == {"steps": 4}
    assert [b["progress"] for b in beats] == [1, 2, 3, 4]
    assert beats[-1] == {"tool": "slow", "progress": 4, "total": 4, "message": "step 4 of 4"}


class SlowInput(BaseModel):
    seconds: float


@workflow.defn(name="SlowToolProbe")
class SlowToolProbe:
    @workflow.run
    async def run(self, inp: SlowInput) -> ToolCallResult:
        # A heartbeat timeout far shorter than the call, and no retry to hide a timeout.
        policy = ActivityPolicy(start_to_close_seconds=60, heartbeat_seconds=1, max_attempts=1)
        return await calls.call_tool(
            "slow", json.dumps({"seconds": inp.seconds}), call_id="c1", key="k1", policy=policy
        )


async def test_a_long_call_reporting_progress_outlives_a_short_heartbeat_timeout(client, rich):
    tools = ToolActivities(ToolRegistry(), [McpActivities(rich).source()])
    task_queue = f"slow-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[SlowToolProbe],
        activities=[tools.call],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        result = await client.execute_workflow(
            SlowToolProbe.run,
            SlowInput(seconds=4),
            id=f"slow-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
            result_type=ToolCallResult,
            execution_timeout=timedelta(seconds=60),
        )

    assert not result.is_error and result_value(result) == {"steps": 16}


async def test_a_huge_tool_result_is_cut_with_a_notice_and_the_run_goes_on(client, settings, scripted, tmp_path):
    config = tmp_path / "agentsteps.toml"
    write_mcp_config(config, {"rich": {"transport": "stdio", "command": sys.executable, "args": [RICH]}})
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "big", "arguments": {"chars": 2_000_000}}]},
                },
                {"match": {"tool_result_for": "big"}, "reply": {"content": "too much to read; summarised"}},
            ]
        }
    )
    spec = make_spec(tools=["big"], tool_result_chars=5_000)
    with_config = settings.model_copy(update={"config_file": config})
    async with running_worker(client, with_config):
        result = await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="read it all"),
            id=f"big-{uuid.uuid4().hex[:8]}",
            task_queue=with_config.task_queue,
            result_type=AgentResult,
        )

    assert result.status == "completed" and result.output == "too much to read; summarised"
    seen = scripted.requests[-1].body["messages"][-1]["content"]
    assert len(seen) < 6_000
    assert "tool result truncated: showing the first 5000 of 2000000 characters" in seen
    assert "code mode" in seen
