"""The MCP client against real servers: the tracker over stdio and streamable HTTP, and a hostile server."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from mcp_support import (
    child_pids,
    free_port,
    hostile,
    http_tracker,
    http_tracker_process,
    kill,
    make_client,
    new_token,
    seeded_db,
    stdio_tracker,
    tool_call,
    wait_for_port,
)

from agentsteps.activities.mcp import McpToolSource
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.settings import load_mcp_config
from agentsteps.contracts.llm.tools import result_value
from agentsteps.contracts.mcp import McpAuthError, McpConfigError, McpProtocolError, McpUnavailableError

TRACKER_TOOLS = {"list_issues", "get_issue", "add_comment", "update_issue"}


@pytest.fixture(scope="module")
def token() -> str:
    return new_token()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return seeded_db(tmp_path_factory.mktemp("tickets"), issues=300)


@pytest.fixture(scope="module")
def lone_db(tmp_path_factory):
    """A tracker database no shared client serves: a test counting its stdio processes sees only its own."""
    return seeded_db(tmp_path_factory.mktemp("lone"))


@pytest.fixture(scope="module")
def http_port(db, token):
    port = free_port()
    with http_tracker_process(db, port, token):
        yield port


@pytest.fixture(scope="module", params=["stdio", "http"])
async def tracker(request, db, token):
    """A client for the tracker over one transport, shared by the module's tests of that transport (they
    only call tools, as a worker's client does for every run); closed (and its child reaped) at the end."""
    if request.param == "stdio":
        server = stdio_tracker(db)
    else:
        server = http_tracker(request.getfixturevalue("http_port"))
    client = make_client({"tickets": server}, {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token})
    yield client
    await client.aclose()


def _rogue_client(marker: Path):
    server = hostile(timeouts={"call_seconds": 1.5})
    server["args"] = [*server["args"], str(marker)]  # unused by the server: tells its process from the others
    return make_client(
        {"rogue": server},
        {"HOSTILE_TOKEN": "hostile-secret-value", "HOSTILE_MARKER": str(marker)},
    )


@pytest.fixture(scope="module")
async def rogue(tmp_path_factory):
    """One hostile server for the tests whose calls leave it as it was (the session survives each)."""
    client = _rogue_client(tmp_path_factory.mktemp("rogue") / "marker")
    yield client
    await client.aclose()


@pytest.fixture
async def fresh_rogue(tmp_path):
    """A hostile server of the test's own, for a test that hangs or kills it."""
    client = _rogue_client(tmp_path / "marker")
    yield client
    await client.aclose()


def _stdio_pids(db) -> list[int]:
    return child_pids(f"--transport stdio --db {db}")


def _sql(db, query: str, *params):
    conn = sqlite3.connect(db)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


# -- the tracker, over both transports ------------------------------------------------


async def test_discovery_returns_tool_schemas_with_output_schemas_and_their_server(tracker):
    tools = {t.name: t for t in await tracker.list_tools("tickets")}
    assert set(tools) == TRACKER_TOOLS
    assert all(t.source == "mcp:tickets" and t.output_schema for t in tools.values())
    assert "issues" in tools["list_issues"].output_schema["properties"]
    assert not tools["list_issues"].side_effects and tools["add_comment"].side_effects
    params = tools["add_comment"].parameters
    # The engine owns the key: the model is never offered it.
    assert "idempotency_key" not in params["properties"] and "idempotency_key" not in params["required"]


async def test_list_issues_returns_validated_structured_content_matching_sql(tracker, db):
    result = await tracker.call_tool(
        "tickets", tool_call("list_issues", {"state": "open", "project": "OPS", "limit": 10})
    )
    assert not result.is_error
    expected = [
        r[0]
        for r in _sql(db, "SELECT id FROM issues WHERE state='open' AND project='OPS' ORDER BY updated_at, id LIMIT 10")
    ]
    assert [i["id"] for i in result.structured["issues"]] == expected
    assert json.loads(result.content) == result.structured
    assert result.structured["next_cursor"]


async def test_same_idempotency_key_twice_posts_one_comment(tracker, db):
    key = f"run-{uuid.uuid4().hex}/call-7"
    before = _sql(db, "SELECT COUNT(*) FROM comments WHERE issue_id='PROJ-3'")[0][0]
    args = {"issue_id": "PROJ-3", "body": "Is this still blocked?", "author": "agentsteps-monitor"}
    first = await tracker.call_tool("tickets", tool_call("add_comment", args, key=key))
    retry = await tracker.call_tool("tickets", tool_call("add_comment", args, key=key))
    assert not first.is_error and first.structured == retry.structured
    assert _sql(db, "SELECT COUNT(*) FROM comments WHERE issue_id='PROJ-3'")[0][0] == before + 1
    # The key the tracker stored is the activity's key, filled in because the model gave none.
    assert _sql(db, "SELECT tool FROM idempotency WHERE key = ?", key) == [("add_comment",)]


async def test_reusing_a_key_for_different_arguments_is_an_error_result(tracker):
    key = f"run-{uuid.uuid4().hex}/call-1"
    ok = await tracker.call_tool(
        "tickets", tool_call("update_issue", {"issue_id": "PROJ-4", "add_labels": ["triaged"]}, key=key)
    )
    clash = await tracker.call_tool(
        "tickets", tool_call("update_issue", {"issue_id": "PROJ-4", "state": "closed"}, key=key)
    )
    assert not ok.is_error and "triaged" in ok.structured["labels"]
    assert clash.is_error and "IdempotencyConflictError" in clash.content


async def test_a_tool_failure_comes_back_as_an_error_result(tracker):
    result = await tracker.call_tool("tickets", tool_call("get_issue", {"id": "NOPE-404"}))
    assert result.is_error and "no issue 'NOPE-404'" in result.content
    bad_args = await tracker.call_tool("tickets", tool_call("get_issue", {"issue": "PROJ-1"}))
    assert bad_args.is_error
    not_json = await tracker.call_tool("tickets", tool_call("get_issue", "{oops"))
    assert not_json.is_error and "tool_arguments_not_json" in not_json.content
    unknown = await tracker.call_tool("tickets", tool_call("delete_everything"))
    assert unknown.is_error and "unknown tool" in unknown.content


async def test_wrong_or_missing_token_is_an_auth_error(db, token, http_port):
    cases = [
        ({"tickets": stdio_tracker(db)}, {"TICKETS_API_TOKEN": "wrong", "TRACKER_EXPECTS": token}),
        ({"tickets": http_tracker(http_port)}, {"TICKETS_API_TOKEN": "wrong"}),
        ({"tickets": http_tracker(http_port, headers={})}, {}),
    ]
    for servers, secrets in cases:
        client = make_client(servers, secrets)
        try:
            with pytest.raises(McpAuthError) as info:
                await client.call_tool("tickets", tool_call("get_issue", {"id": "PROJ-1"}))
            assert not info.value.retryable and token not in str(info.value)
        finally:
            await client.aclose()


async def test_a_secret_missing_from_the_worker_is_a_config_error_naming_it(db):
    client = make_client({"tickets": stdio_tracker(db)}, {})
    with pytest.raises(McpConfigError, match="TICKETS_API_TOKEN"):
        await client.list_tools()


async def test_the_token_never_appears_in_schemas_results_or_errors(tracker, token):
    seen = [t.model_dump_json() for t in await tracker.list_tools()]
    for call in (
        tool_call("list_issues", {"limit": 50}),
        tool_call("get_issue", {"id": "PROJ-1"}),
        tool_call("get_issue", {"id": "NOPE-1"}),
        tool_call("add_comment", {"issue_id": "PROJ-5", "body": "ping", "author": "bot"}),
    ):
        seen.append((await tracker.call_tool("tickets", call)).model_dump_json())
    assert all(token not in text for text in seen)


# -- reconnecting -------------------------------------------------------------------


async def test_a_killed_stdio_server_is_restarted_on_the_next_call(lone_db, token):
    client = make_client({"tickets": stdio_tracker(lone_db)}, {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token})
    try:
        assert not (await client.call_tool("tickets", tool_call("get_issue", {"id": "PROJ-1"}))).is_error
        [pid] = _stdio_pids(lone_db)
        kill(pid)
        failures = 0
        for _ in range(3):  # what Temporal's retry would do
            try:
                result = await client.call_tool("tickets", tool_call("get_issue", {"id": "PROJ-1"}))
                break
            except McpUnavailableError:
                failures += 1
        assert not result.is_error and failures <= 1
        assert _stdio_pids(lone_db) and pid not in _stdio_pids(lone_db)
    finally:
        await client.aclose()
    assert _stdio_pids(lone_db) == []


async def test_an_http_server_that_went_away_is_reconnected_once_it_is_back(db, token):
    port = free_port()
    client = make_client({"tickets": http_tracker(port)}, {"TICKETS_API_TOKEN": token})
    try:
        with http_tracker_process(db, port, token):
            assert not (await client.call_tool("tickets", tool_call("get_issue", {"id": "PROJ-1"}))).is_error
        with pytest.raises(McpUnavailableError) as info:
            await client.call_tool("tickets", tool_call("get_issue", {"id": "PROJ-1"}))
        assert info.value.retryable
        with http_tracker_process(db, port, token):
            wait_for_port(port)
            assert not (await client.call_tool("tickets", tool_call("get_issue", {"id": "PROJ-2"}))).is_error
    finally:
        await client.aclose()


# -- a hostile server -----------------------------------------------------------------


async def test_hostile_discovery_leaves_out_tools_with_invalid_names(rogue):
    names = {t.name for t in await rogue.list_tools()}
    assert "good_output" in names and "bad name!" not in names


async def test_structured_output_that_breaks_its_schema_is_a_violation_result(rogue):
    good = await rogue.call_tool("rogue", tool_call("good_output"))
    assert not good.is_error and good.structured == {"count": 3}
    bad = await rogue.call_tool("rogue", tool_call("bad_output"))
    assert bad.is_error and bad.structured is None
    assert "[tool_output_invalid] at $.count" in bad.content
    missing = await rogue.call_tool("rogue", tool_call("text_only_with_schema"))
    assert missing.is_error and "tool_output_invalid" in missing.content


async def test_a_result_that_is_not_valid_mcp_is_a_protocol_error(rogue):
    with pytest.raises(McpProtocolError) as info:
        await rogue.call_tool("rogue", tool_call("garbage"))
    assert not info.value.retryable
    # The session survives a bad answer.
    assert not (await rogue.call_tool("rogue", tool_call("good_output"))).is_error


async def test_text_content_is_parsed_as_json_when_it_is_json(rogue):
    as_json = await rogue.call_tool("rogue", tool_call("text_json"))
    assert as_json.structured == {"a": [1, 2]}
    plain = await rogue.call_tool("rogue", tool_call("plain_text"))
    assert plain.structured is None and plain.content == "hello there" and not plain.is_error


async def test_is_error_becomes_an_error_result_for_the_model(rogue):
    result = await rogue.call_tool("rogue", tool_call("fails"))
    assert result.is_error and result.content == "boom: the widget is on fire"


async def test_a_hanging_server_times_out_as_retryable_and_is_replaced(fresh_rogue, tmp_path):
    rogue, marker = fresh_rogue, str(tmp_path / "marker")
    await rogue.list_tools()
    [pid] = child_pids(marker)
    started = time.monotonic()
    with pytest.raises(McpUnavailableError, match="timed out"):
        await rogue.call_tool("rogue", tool_call("hang"))
    assert time.monotonic() - started < 6
    assert pid not in child_pids(marker)
    assert not (await rogue.call_tool("rogue", tool_call("good_output"))).is_error


async def test_a_server_dying_mid_call_is_retryable_and_the_next_call_reconnects(fresh_rogue):
    rogue = fresh_rogue
    with pytest.raises(McpUnavailableError):
        await rogue.call_tool("rogue", tool_call("die"))
    assert not (await rogue.call_tool("rogue", tool_call("good_output"))).is_error


async def test_the_idempotency_key_is_always_the_engines_whatever_the_arguments_say(rogue):
    filled = await rogue.call_tool("rogue", tool_call("write", {"text": "a"}, key="run-9/call-1"))
    assert filled.structured == {"text": "a", "idempotency_key": "run-9/call-1"}
    chosen = await rogue.call_tool(
        "rogue", tool_call("write", {"text": "a", "idempotency_key": "reminder-001"}, key="run-9/call-2")
    )
    assert chosen.structured["idempotency_key"] == "run-9/call-2", "a key in the arguments never reaches the server"


async def test_a_secret_the_server_echoes_back_is_redacted(rogue):
    result = await rogue.call_tool("rogue", tool_call("echo_secret"))
    assert "hostile-secret-value" not in result.model_dump_json()
    assert result.structured == {"token": "[redacted]"}


# -- config and routing ---------------------------------------------------------------


def test_toml_config_is_parsed_with_secret_references_and_transport_aliases(tmp_path):
    path = tmp_path / "agentsteps.toml"
    path.write_text(
        '[worker]\ntask_queue = "q"\n\n'
        '[mcp.servers.tickets]\ntransport = "stdio"\ncommand = "python"\nargs = ["-m", "x"]\n'
        'env = { TICKETS_API_TOKEN = "secret:TICKETS_API_TOKEN" }\n\n'
        '[mcp.servers.remote]\ntransport = "streamable-http"\nurl = "http://127.0.0.1:1/mcp"\n'
        'headers = { Authorization = "Bearer ${secret:REMOTE_TOKEN}" }\ntool_prefix = "remote_"\n'
        "timeouts = { call_seconds = 5 }\n"
    )
    config = load_mcp_config(path)
    assert config.servers["tickets"].transport == "stdio"
    assert config.servers["remote"].transport == "http" and config.servers["remote"].timeouts.call_seconds == 5
    assert config.secret_names() == {"TICKETS_API_TOKEN", "REMOTE_TOKEN"}
    path.write_text('[mcp.servers.bad]\ntransport = "stdio"\n')
    with pytest.raises(McpConfigError, match="command"):
        load_mcp_config(path)
    with pytest.raises(McpConfigError, match="does not exist"):
        load_mcp_config(tmp_path / "missing.toml")


async def test_unknown_servers_and_colliding_tool_names_are_config_errors(db, token):
    secrets = {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token}
    client = make_client({"a": stdio_tracker(db), "b": stdio_tracker(db)}, secrets)
    try:
        with pytest.raises(McpConfigError, match="no MCP server named 'c'"):
            await client.call_tool("c", tool_call("get_issue", {"id": "PROJ-1"}))
        with pytest.raises(McpConfigError, match="tool_prefix"):
            await client.list_tools()
    finally:
        await client.aclose()
    client = make_client({"a": stdio_tracker(db), "b": stdio_tracker(db, tool_prefix="b_")}, secrets)
    try:
        names = {t.name for t in await client.list_tools()}
        assert {"get_issue", "b_get_issue"} <= names
        result = await client.call_tool("b", tool_call("b_get_issue", {"id": "PROJ-1"}))
        assert result.structured["id"] == "PROJ-1"
    finally:
        await client.aclose()


async def test_tools_call_reaches_mcp_tools_through_the_tool_source(db, token):
    client = make_client({"tickets": stdio_tracker(db)}, {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token})
    try:
        tools = ToolActivities(ToolRegistry(), [McpToolSource(client)])
        assert TRACKER_TOOLS <= set(await tools.catalog())
        result = await tools.call(tool_call("get_issue", {"id": "PROJ-1"}))
        assert not result.is_error and result_value(result)["id"] == "PROJ-1"
    finally:
        await client.aclose()


async def test_concurrent_calls_share_one_session(lone_db, token):
    client = make_client({"tickets": stdio_tracker(lone_db)}, {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token})
    try:
        results = await asyncio.gather(
            *[client.call_tool("tickets", tool_call("get_issue", {"id": f"PROJ-{n}"})) for n in range(1, 11)]
        )
        assert [r.structured["id"] for r in results] == [f"PROJ-{n}" for n in range(1, 11)]
        assert len(_stdio_pids(lone_db)) == 1
    finally:
        await client.aclose()
