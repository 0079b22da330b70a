"""The tracker's token never leaves the worker: not in history, prompts, worker logs or server output.

An agent run reads and writes tickets through the tracker, over stdio (token
from the environment) and over streamable HTTP (token from
``$AGENTSTEPS_SECRETS_DIR``), with every logger at DEBUG. One of the calls
is refused, so error paths are scanned too.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import nullcontext

import pytest
from agent_support import make_spec
from mcp_support import (
    free_port,
    http_tracker,
    http_tracker_process,
    new_token,
    seeded_db,
    stdio_tracker,
    write_mcp_config,
)
from secret_scan import SecretScan

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker

SCRIPT = {
    "rules": [
        {
            "match": {"role": "user"},
            "reply": {"tool_calls": [{"name": "list_issues", "arguments": {"state": "open", "limit": 2}}]},
        },
        {
            "match": {"tool_result_for": "list_issues"},
            "reply": {"tool_calls": [{"name": "get_issue", "arguments": {"id": "NOPE-404"}}]},
        },
        {
            "match": {"tool_result_for": "get_issue"},
            "reply": {
                "tool_calls": [
                    {"name": "add_comment", "arguments": {"issue_id": "PROJ-2", "body": "Any news?", "author": "bot"}}
                ]
            },
        },
        {"match": {"tool_result_for": "add_comment"}, "reply": {"content": "done"}},
    ]
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_tracker_token_never_reaches_history_prompts_or_logs(
    transport, client, settings, scripted, tmp_path, monkeypatch, caplog, capfd
):
    token = new_token()
    db = seeded_db(tmp_path, issues=30)
    config = tmp_path / "agentsteps.toml"
    server_log = tmp_path / "tracker.log"
    if transport == "stdio":
        monkeypatch.setenv("TICKETS_API_TOKEN", token)
        monkeypatch.setenv("TRACKER_EXPECTS", token)
        write_mcp_config(config, {"tracker": stdio_tracker(db)})
        server = nullcontext()
    else:
        secrets_dir = tmp_path / "secrets"
        secrets_dir.mkdir()
        (secrets_dir / "TRACKER_TOKEN").write_text(token + "\n")
        monkeypatch.setenv("AGENTSTEPS_SECRETS_DIR", str(secrets_dir))
        monkeypatch.delenv("TRACKER_TOKEN", raising=False)
        port = free_port()
        write_mcp_config(
            config, {"tracker": http_tracker(port, headers={"Authorization": "Bearer ${secret:TRACKER_TOKEN}"})}
        )
        # The tracker's own output is kept so it can be scanned for the token too.
        server = http_tracker_process(db, port, token, env={"PATH": "/usr/bin:/bin"}, log=server_log)

    caplog.set_level(logging.DEBUG)
    scripted.set_script(SCRIPT)
    with_config = settings.model_copy(update={"config_file": config})
    with server:
        async with running_worker(client, with_config):
            handle = await client.start_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=make_spec(tools=["list_issues", "get_issue", "add_comment"]), input="triage"),
                id=f"mcp-secret-{uuid.uuid4().hex[:8]}",
                task_queue=with_config.task_queue,
                result_type=AgentResult,
            )
            result = await handle.result()
            history = await handle.fetch_history()

    assert result.status == "completed", result
    calls = [step.tool_calls[0] for step in result.steps[:3]]
    assert [c.is_error for c in calls] == [False, True, False]  # the run really used the tracker, refusal included

    # Worker logs at DEBUG: the SDK, httpx and our own loggers all had their say.
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert caplog.records
    if transport == "http":
        assert f"127.0.0.1:{port}/mcp" in logged  # the scan covered the HTTP client's own request logs
    # Whatever the worker or a stdio child printed, and the HTTP tracker's own output.
    out, err = capfd.readouterr()
    scan = SecretScan(token).history(history).requests(scripted.requests).text("worker logs", logged)
    scan.text("worker stdout", out).text("worker stderr", err).metrics()
    if server_log.exists():
        scan.files("tracker server log", server_log)
    scan.assert_clean()
