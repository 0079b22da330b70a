"""Tool names and call ids end to end: real dev server, real HTTP to the
scripted model, the real ticket tracker as an MCP server over stdio."""

from __future__ import annotations

import json

from agentsteps.worker import running_worker

from agent_support import make_spec, run_agent, run_agent_failure
from mcp_support import new_token, seeded_db, stdio_tracker, write_mcp_config


async def test_a_model_reusing_call_0_every_turn_completes_with_engine_ids(engine, scripted):
    weather = {"tool_calls": [{"id": "call_0", "name": "get_weather", "arguments": {"city": "Paris"}}]}
    scripted.set_script({"replies": [weather, weather, weather, {"content": "Paris is sunny."}]})
    result = await run_agent(engine.client, engine.task_queue, make_spec())

    assert result.status == "completed" and result.output == "Paris is sunny."
    ids = [c.call_id for s in result.steps for c in s.tool_calls]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert all(not c.is_error for s in result.steps for c in s.tool_calls)
    # On the wire every call and every result still carries the provider's own id.
    last = scripted.requests[-1].body["messages"]
    assert [c["id"] for m in last for c in m.get("tool_calls", [])] == ["call_0"] * 3
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == ["call_0"] * 3


async def test_dotted_mcp_tool_names_go_out_api_safe_and_come_back(client, settings, scripted, tmp_path, monkeypatch):
    token = new_token()
    monkeypatch.setenv("TICKETS_API_TOKEN", token)
    monkeypatch.setenv("TRACKER_EXPECTS", token)
    config = write_mcp_config(tmp_path / "agentsteps.toml", {"tracker": stdio_tracker(seeded_db(tmp_path, issues=5), tool_prefix="tracker.")})
    scripted.set_script({"rules": [
        {"match": {"role": "user"}, "reply": {"tool_calls": [
            {"name": "tracker_list_issues", "arguments": {"state": "open", "limit": 2}}]}},
        {"match": {"role": "tool"}, "reply": {"content": "listed"}},
    ]})
    own = settings.model_copy(update={"config_file": config})
    async with running_worker(client, own):
        result = await run_agent(client, own.task_queue, make_spec(tools=["tracker.list_issues"]), "list them")

    assert result.status == "completed", result
    [record] = result.steps[0].tool_calls
    assert record.name == "tracker.list_issues" and not record.is_error, record.content
    assert len(json.loads(record.content)["issues"]) == 2
    assert [t["function"]["name"] for t in scripted.requests[0].body["tools"]] == ["tracker_list_issues"]
    assert [c["function"]["name"] for c in scripted.requests[1].body["messages"][2]["tool_calls"]] == [
        "tracker_list_issues"]


async def test_two_mcp_tools_sharing_a_wire_name_fail_the_run_at_start(client, settings, scripted, tmp_path, monkeypatch):
    token = new_token()
    monkeypatch.setenv("TICKETS_API_TOKEN", token)
    monkeypatch.setenv("TRACKER_EXPECTS", token)
    config = write_mcp_config(tmp_path / "agentsteps.toml", {
        "dotted": stdio_tracker(seeded_db(tmp_path, issues=3), tool_prefix="t."),
        "underscored": stdio_tracker(seeded_db(tmp_path, issues=3), tool_prefix="t_"),
    })
    scripted.set_script({"default": {"content": "never asked"}})
    own = settings.model_copy(update={"config_file": config})
    async with running_worker(client, own):
        error = await run_agent_failure(client, own.task_queue, make_spec(tools=["t.list_issues", "t_list_issues"]))

    assert error.type == "ToolConfigError" and error.non_retryable
    assert "'t.list_issues', 't_list_issues'" in str(error) and "API tool name 't_list_issues'" in str(error)
    assert scripted.requests == []  # nothing reached the model
