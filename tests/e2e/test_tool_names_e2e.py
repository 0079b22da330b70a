"""Tool names and call ids end to end: real dev server, real HTTP to the
scripted model, the real ticket tracker as an MCP server over stdio."""

from __future__ import annotations

import json

import pytest
from agent_support import make_spec, run_agent, run_agent_failure
from mcp_support import new_token, seeded_db, stdio_tracker, write_mcp_config
from pydantic import SecretStr

from agentsteps.contracts import LLMConfig
from agentsteps.worker import running_worker


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_model_reusing_call_0_every_turn_gets_unique_ids_on_the_wire(client, settings, scripted, provider):
    weather = {"tool_calls": [{"id": "call_0", "name": "get_weather", "arguments": {"city": "Paris"}}]}
    scripted.set_script({"replies": [weather, weather, weather, {"content": "Paris is sunny."}]})
    model = LLMConfig(provider=provider, model="scripted-20260101", max_tokens=256, context_window=16_000)
    keyed = settings.providers.model_copy(update={"anthropic_api_key": SecretStr("sk-ant-test")})
    async with running_worker(client, settings.model_copy(update={"providers": keyed})):
        result = await run_agent(client, settings.task_queue, make_spec(model=model))

    assert result.status == "completed" and result.output == "Paris is sunny."
    ids = [c.call_id for s in result.steps for c in s.tool_calls]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert all(not c.is_error for s in result.steps for c in s.tool_calls)
    # On the wire every call carries the engine's unique id and every result names it: the scripted
    # model refuses a repeated tool_use id as the Messages API does.
    body = scripted.requests[-1].body
    if provider == "openai":
        sent = [c["id"] for m in body["messages"] for c in m.get("tool_calls", [])]
        answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    else:
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        sent = [b["id"] for b in blocks if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert sent == answered == ids


async def test_dotted_mcp_tool_names_go_out_api_safe_and_come_back(client, settings, scripted, tmp_path, monkeypatch):
    token = new_token()
    monkeypatch.setenv("TICKETS_API_TOKEN", token)
    monkeypatch.setenv("TRACKER_EXPECTS", token)
    config = write_mcp_config(
        tmp_path / "agentsteps.toml", {"tracker": stdio_tracker(seeded_db(tmp_path, issues=5), tool_prefix="tracker.")}
    )
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "tool_calls": [{"name": "tracker_list_issues", "arguments": {"state": "open", "limit": 2}}]
                    },
                },
                {"match": {"role": "tool"}, "reply": {"content": "listed"}},
            ]
        }
    )
    own = settings.model_copy(update={"config_file": config})
    async with running_worker(client, own):
        result = await run_agent(client, own.task_queue, make_spec(tools=["tracker.list_issues"]), "list them")

    assert result.status == "completed", result
    [record] = result.steps[0].tool_calls
    assert record.name == "tracker.list_issues" and not record.is_error, record.content
    assert len(json.loads(record.content)["issues"]) == 2
    assert [t["function"]["name"] for t in scripted.requests[0].body["tools"]] == ["tracker_list_issues"]
    assert [c["function"]["name"] for c in scripted.requests[1].body["messages"][2]["tool_calls"]] == [
        "tracker_list_issues"
    ]


async def test_two_mcp_tools_sharing_a_wire_name_fail_the_run_at_start(
    client, settings, scripted, tmp_path, monkeypatch
):
    token = new_token()
    monkeypatch.setenv("TICKETS_API_TOKEN", token)
    monkeypatch.setenv("TRACKER_EXPECTS", token)
    config = write_mcp_config(
        tmp_path / "agentsteps.toml",
        {
            "dotted": stdio_tracker(seeded_db(tmp_path, issues=3), tool_prefix="t."),
            "underscored": stdio_tracker(seeded_db(tmp_path, issues=3), tool_prefix="t_"),
        },
    )
    scripted.set_script({"default": {"content": "never asked"}})
    own = settings.model_copy(update={"config_file": config})
    async with running_worker(client, own):
        error = await run_agent_failure(client, own.task_queue, make_spec(tools=["t.list_issues", "t_list_issues"]))

    assert error.type == "ToolConfigError" and error.non_retryable
    assert "'t.list_issues', 't_list_issues'" in str(error) and "API tool name 't_list_issues'" in str(error)
    assert scripted.requests == []  # nothing reached the model
