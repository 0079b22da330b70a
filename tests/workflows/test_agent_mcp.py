"""MCP tools are typed functions like any other: AgentWorkflow uses the tracker over stdio."""

from __future__ import annotations

import json
import uuid

from agent_support import make_spec
from mcp_support import new_token, seeded_db, stdio_tracker, write_mcp_config
from secret_scan import SecretScan

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker


async def test_agent_reads_and_writes_tracker_tickets_through_mcp_without_leaking_the_token(
    client, settings, scripted, tmp_path, monkeypatch
):
    token = new_token()
    monkeypatch.setenv("TICKETS_API_TOKEN", token)
    monkeypatch.setenv("TRACKER_EXPECTS", token)
    db = seeded_db(tmp_path, issues=40)
    config = tmp_path / "agentsteps.toml"
    write_mcp_config(config, {"tracker": stdio_tracker(db)})
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "list_issues", "arguments": {"state": "open", "limit": 3}}]},
                },
                {
                    "match": {"tool_result_for": "list_issues"},
                    "reply": {
                        "tool_calls": [
                            {
                                "name": "add_comment",
                                "arguments": {"issue_id": "PROJ-1", "body": "Looking into it.", "author": "bot"},
                            }
                        ]
                    },
                },
                {"match": {"tool_result_for": "add_comment"}, "reply": {"content": "commented"}},
            ]
        }
    )
    with_config = settings.model_copy(update={"config_file": config})
    async with running_worker(client, with_config):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=["list_issues", "add_comment"]), input="triage the open tickets"),
            id=f"mcp-{uuid.uuid4().hex[:8]}",
            task_queue=with_config.task_queue,
            result_type=AgentResult,
        )
        result = await handle.result()
        history = await handle.fetch_history()

    assert result.status == "completed", result
    listed, commented = (step.tool_calls[0] for step in result.steps[:2])
    assert not listed.is_error and len(json.loads(listed.content)["issues"]) == 3
    assert not commented.is_error, commented.content
    # The model saw the MCP tools' real schemas, output schema included.
    first_request_tools = {t["function"]["name"] for t in scripted.requests[0].body["tools"]}
    assert first_request_tools == {"list_issues", "add_comment"}
    # Written on the tracker's side, exactly once, through the MCP server.
    import sqlite3

    with sqlite3.connect(db) as conn:
        bodies = [r[0] for r in conn.execute("SELECT body FROM comments WHERE issue_id = 'PROJ-1'")]
    assert bodies.count("Looking into it.") == 1
    SecretScan(token).history(history).requests(scripted.requests).assert_clean()
