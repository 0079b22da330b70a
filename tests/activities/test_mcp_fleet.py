"""The MCP fleet against real servers: isolation, breaker, concurrency limit, bounded failure, fresh catalogs.

The tracker over stdio is the healthy server; ``mcp_fleet_server.py`` is the
one taken down, hung, changed and brought back (files in its control folder).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from fleet_support import Control, eventually, fleet_server, sample, unique
from mcp_support import make_client, new_token, seeded_db, stdio_tracker, tool_call

from agentsteps.activities.mcp import McpFleet, McpToolSource
from agentsteps.activities.mcp.health import ServerHealth
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.client.settings import load_mcp_config
from agentsteps.contracts.config.mcp_config import parse_mcp_config
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.llm.tools import TOOL_REMOVED, ToolsDescribeInput
from agentsteps.contracts.mcp import McpConfigError, McpProtocolError, McpServerDownError, McpUnavailableError
from agentsteps.worker import load_registry

FAST = {"connect_seconds": 5, "call_seconds": 0.6, "list_seconds": 5}


@pytest.fixture(scope="module")
def token() -> str:
    return new_token()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return seeded_db(tmp_path_factory.mktemp("fleet"), issues=20)


def _fleet(servers, token) -> McpFleet:
    return McpFleet(make_client(servers, {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token}))


# ------------------------------------------------------------------ hostile config


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"catalog_ttl_seconds": -5}, "catalog_ttl_seconds"),
        ({"catalog_ttl_seconds": 0}, "catalog_ttl_seconds"),
        ({"give_up_seconds": -1}, "give_up_seconds"),
        ({"max_concurrent_calls": 0}, "max_concurrent_calls"),
        ({"breaker": {"failures": 0}}, "breaker.failures"),
        ({"breaker": {"open_seconds": 10, "max_open_seconds": 2}}, "max_open_seconds must be at least open_seconds"),
        ({"breaker": {"half_open_probes": -1}}, "breaker.half_open_probes"),
        ({"breaker": {"open_seconds": "soon"}}, "breaker.open_seconds"),
        ({"breaker": {"failure": 3}}, "breaker.failure"),
        ({"required": "maybe"}, "required"),
        ({"tools": "echo"}, "tools"),
    ],
)
def test_malformed_fleet_settings_are_config_errors_naming_the_key(table, field):
    with pytest.raises(McpConfigError, match=field.replace(".", r"\.")) as err:
        parse_mcp_config({"mcp": {"servers": {"x": {"transport": "stdio", "command": "x", **table}}}})
    assert "mcp.servers.x" in str(err.value)


def test_the_fleet_settings_are_read_from_the_config_file(tmp_path):
    path = tmp_path / "agentsteps.toml"
    path.write_text(
        '[mcp.servers.flaky]\ntransport = "stdio"\ncommand = "python"\nrequired = true\ntools = ["echo"]\n'
        "catalog_ttl_seconds = 30\ngive_up_seconds = 10\nmax_concurrent_calls = 4\n"
        "breaker = { failures = 2, open_seconds = 1, max_open_seconds = 8, half_open_probes = 2 }\n"
    )
    server = load_mcp_config(path).servers["flaky"]
    assert server.required and server.tools == ["echo"] and server.catalog_ttl_seconds == 30
    assert (server.give_up_seconds, server.max_concurrent_calls) == (10, 4)
    assert server.breaker.model_dump() == {
        "failures": 2,
        "open_seconds": 1,
        "max_open_seconds": 8,
        "half_open_probes": 2,
    }


# ------------------------------------------------------------------ isolation


async def test_misconfigured_servers_are_reported_at_start_and_fail_only_their_own_tools(db, token, tmp_path, caplog):
    missing, bad_url, no_secret = unique("missing"), unique("badurl"), unique("nosecret")
    tickets = unique("tickets")
    fleet = _fleet(
        {
            missing: {"transport": "stdio", "command": "/nonexistent/mcp-server", "tool_prefix": "m_"},
            bad_url: {"transport": "http", "url": "http:///mcp", "tool_prefix": "u_"},
            no_secret: fleet_server(Control(tmp_path / "c"), env={"X": "secret:NOT_SET_ANYWHERE"}, tools=["echo"]),
            tickets: stdio_tracker(db),
        },
        token,
    )
    try:
        report = fleet.report()
        assert {report[s]["state"] for s in (missing, bad_url, no_secret)} == {"misconfigured"}
        assert "not an executable file" in report[missing]["last_error"]
        assert "has no host" in report[bad_url]["last_error"]
        assert "NOT_SET_ANYWHERE" in report[no_secret]["last_error"]
        assert sum("misconfigured" in r.message for r in caplog.records) == 3
        assert sample("agentsteps_mcp_server_up", server=missing) == 0
        # A healthy server's tool is described and called as if the others did not exist.
        [schema] = await fleet.describe(["get_issue"])
        assert schema.source == f"mcp:{tickets}"
        assert (await fleet.call(tool_call("get_issue", {"id": "PROJ-1"}))).structured["id"] == "PROJ-1"
        # A run naming a misconfigured server's tool fails typed, naming it, not retried.
        with pytest.raises(McpConfigError, match=missing) as err:
            await fleet.describe(["m_anything"])
        assert not err.value.retryable
        with pytest.raises(McpConfigError, match=no_secret):
            await fleet.describe(["echo"])
    finally:
        await fleet.aclose()


async def test_a_name_is_looked_up_only_on_the_servers_that_serve_it(db, token, tmp_path):
    control = Control(tmp_path / "c")
    control.set("down")
    down, tickets = unique("down"), unique("tickets")
    fleet = _fleet({down: fleet_server(control, tool_prefix="flaky_"), tickets: stdio_tracker(db)}, token)
    try:
        assert {t.name for t in await fleet.describe(["get_issue", "list_issues"])} == {"get_issue", "list_issues"}
        # The down server was never started: its name prefix rules it out.
        assert fleet.report()[down]["last_error"] == "not connected yet"
        with pytest.raises(McpUnavailableError, match=down):
            await fleet.describe(["flaky_echo"])
        assert fleet.report()[down]["state"] == "down"
    finally:
        await fleet.aclose()


async def test_a_run_naming_only_python_tools_contacts_no_mcp_server(tmp_path):
    control = Control(tmp_path / "c")
    control.offer("get_weather")  # offered as ext_get_weather: its prefix rules the Python name out
    name = unique("unasked")
    fleet = _fleet({name: fleet_server(control, tool_prefix="ext_")}, "unused")
    tools = ToolActivities(load_registry(WorkerSettings()), [McpToolSource(fleet)])
    try:
        [schema] = await tools.describe(ToolsDescribeInput(names=["get_weather"]))
        result = await tools.call(tool_call("get_weather", {"city": "Paris"}))
        assert schema.source == "python" and not result.is_error
        assert fleet.report()[name]["last_error"] == "not connected yet"
        assert not (control.dir / "calls").exists() and fleet.client.pool.current(name) is None
    finally:
        await fleet.aclose()


# ------------------------------------------------------------------ bounded, breaker, recovery


async def test_a_down_server_fails_retryable_then_typed_past_its_bound_and_is_used_again_when_back(tmp_path):
    control = Control(tmp_path / "c")
    control.set("down")
    name = unique("flaky")
    config = fleet_server(
        control, give_up_seconds=1.5, timeouts=FAST, breaker={"failures": 2, "open_seconds": 0.5, "max_open_seconds": 1}
    )
    fleet = _fleet({name: config}, "unused")
    try:
        with pytest.raises(McpUnavailableError) as first:
            await fleet.describe(["echo"])
        assert first.value.retryable
        fleet.start()  # the watcher's probes, each open period, see it down the whole time
        await asyncio.sleep(1.6)
        with pytest.raises(McpServerDownError, match=rf"'{name}'.*give_up_seconds") as down:
            await fleet.describe(["echo"])
        assert not down.value.retryable
        assert fleet.report()[name]["state"] == "circuit_open"
        control.set("down", on=False)
        # The watcher probes it once the open period ends: no restart, no run needed.
        await eventually(lambda: fleet.report()[name]["state"] == "up", what="the server is seen up again")
        result = await fleet.call(tool_call("echo", {"text": "back"}))
        assert result.structured == {"tool": "echo", "args": {"text": "back"}}
        assert sample("agentsteps_mcp_server_up", server=name) == 1
        assert sample("agentsteps_mcp_reconnects_total", server=name) == 0  # first session
    finally:
        await fleet.aclose()


async def test_a_hung_server_opens_its_circuit_and_calls_fail_fast_until_a_probe_succeeds(tmp_path):
    control = Control(tmp_path / "c")
    name = unique("hung")
    fleet = _fleet(
        {
            name: fleet_server(
                control, timeouts=FAST, max_concurrent_calls=2, breaker={"failures": 2, "open_seconds": 1.5}
            )
        },
        "unused",
    )
    received = lambda: len((control.dir / "calls").read_text().split())  # noqa: E731
    try:
        assert not (await fleet.call(tool_call("echo"))).is_error
        control.set("hang")
        calls = [asyncio.create_task(fleet.call(tool_call("echo"))) for _ in range(3)]
        await asyncio.sleep(0.3)
        assert received() == 1 + 2  # max_concurrent_calls: the third call waits for a slot, off the server
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        # The first to time out drops the session (killing the hung child): the other in flight sees it close.
        assert all(isinstance(o, McpUnavailableError) and o.retryable for o in outcomes), outcomes
        assert fleet.report()[name]["state"] == "circuit_open"
        before = received()
        started = time.monotonic()
        for _ in range(5):  # not retried into a pile: none of these reaches the server
            with pytest.raises(McpUnavailableError, match="circuit open") as fast:
                await fleet.call(tool_call("echo"))
            assert fast.value.outcome == "circuit_open" and fast.value.retryable
        assert time.monotonic() - started < 0.5 and received() == before
        control.set("hang", on=False)
        await asyncio.sleep(1.6)
        # Half-open: this call is the probe; it succeeds and closes the circuit.
        assert not (await fleet.call(tool_call("echo", {"text": "probe"}))).is_error
        assert fleet.report()[name]["state"] == "up" and fleet.report()[name]["last_error"] is None
        counts = {
            o: sample("agentsteps_mcp_calls_total", server=name, outcome=o)
            for o in ("ok", "timeout", "circuit_open", "infra_error", "error")
        }
        assert counts["ok"] == 2 and counts["error"] == 0 and counts["timeout"] >= 1
        assert counts["timeout"] + counts["infra_error"] + counts["circuit_open"] == 3 + 5
        assert sample("agentsteps_mcp_call_seconds_count", server=name) >= 4  # ok, ok and those that were sent
        assert sample("agentsteps_mcp_reconnects_total", server=name) >= 1  # the hung session was dropped
    finally:
        await fleet.aclose()


def test_a_failed_probe_reopens_the_circuit_for_twice_as_long_up_to_the_cap():
    config = parse_mcp_config(
        {
            "mcp": {
                "servers": {
                    "x": {
                        "transport": "stdio",
                        "command": "x",
                        "breaker": {"failures": 1, "open_seconds": 1, "max_open_seconds": 3},
                    }
                }
            }
        }
    ).servers["x"]
    now = [0.0]
    health = ServerHealth(unique("breaker"), config, clock=lambda: now[0])
    outage = McpUnavailableError("connect: refused", server="x")
    health.failed(outage, probe=False)
    periods = []
    for _ in range(3):
        with pytest.raises(McpUnavailableError, match="circuit open"):
            health.admit()
        opened = now[0]
        while True:
            now[0] += 0.25
            try:
                probe = health.admit()
                break
            except McpUnavailableError:
                pass
        periods.append(now[0] - opened)
        assert probe
        with pytest.raises(McpUnavailableError, match="a probe is in flight"):
            health.admit()
        health.failed(outage, probe=True)
    assert periods == [1.0, 2.0, 3.0]


def test_down_time_counts_only_failures_seen_close_together_not_an_unobserved_gap():
    config = parse_mcp_config(
        {
            "mcp": {
                "servers": {
                    "x": {"transport": "stdio", "command": "x", "give_up_seconds": 3, "breaker": {"failures": 99}}
                }
            }
        }
    ).servers["x"]
    now = [0.0]
    health = ServerHealth(unique("streak"), config, clock=lambda: now[0])
    bounce = McpUnavailableError("connect: refused", server="x")
    health.succeeded(probe=False)
    health.failed(bounce, probe=False)  # a bounce; then nobody looks at the server for 7 s
    now[0] = 7.0
    health.failed(bounce, probe=False)  # the next bounce
    assert health.down_for() == 0.0
    for second in (8.0, 9.0, 10.0, 11.0):  # a real outage: failures seen a second apart
        now[0] = second
        health.failed(bounce, probe=False)
    assert health.down_for() == 4.0
    health.succeeded(probe=False)
    assert health.down_for() is None


# ------------------------------------------------------------------ fresh catalog


async def test_list_changed_offers_a_new_tool_at_once_and_a_removed_one_is_a_typed_tool_error(tmp_path):
    control = Control(tmp_path / "c")
    control.offer("echo")
    name = unique("changing")
    fleet = _fleet({name: fleet_server(control, catalog_ttl_seconds=3600)}, "unused")
    fleet.start()
    try:
        assert [t.name for t in await fleet.describe(["echo", "shout"])] == ["echo"]
        control.offer("echo", "shout")
        await eventually(lambda: fleet.describe(["shout"]), what="the new tool is offered (list_changed)")
        control.offer("shout")
        await asyncio.sleep(0.5)
        removed = await fleet.call(tool_call("echo"))
        assert removed.is_error and removed.error_type == TOOL_REMOVED and "shout" in removed.content
    finally:
        await fleet.aclose()


async def test_without_a_notification_the_catalog_is_refreshed_after_its_ttl(tmp_path):
    control = Control(tmp_path / "c")
    control.set("quiet")
    name = unique("quiet")
    fleet = _fleet({name: fleet_server(control, catalog_ttl_seconds=1.5)}, "unused")
    try:
        assert [t.name for t in await fleet.describe(["echo", "later"])] == ["echo"]
        control.offer("echo", "later")
        await asyncio.sleep(0.3)
        assert [t.name for t in await fleet.describe(["echo", "later"])] == ["echo"]  # cached, not asked
        await asyncio.sleep(1.5)
        assert [t.name for t in await fleet.describe(["echo", "later"])] == ["echo", "later"]
    finally:
        await fleet.aclose()


async def test_a_malformed_tools_list_is_a_protocol_error_for_that_server_only(db, token, tmp_path):
    control = Control(tmp_path / "c")
    control.set("malformed")
    bad, tickets = unique("malformed"), unique("tickets")
    fleet = _fleet({bad: fleet_server(control, tool_prefix="bad_"), tickets: stdio_tracker(db)}, token)
    try:
        with pytest.raises(McpProtocolError, match=bad) as err:
            await fleet.describe(["bad_echo"])
        assert not err.value.retryable
        assert fleet.report()[bad]["state"] == "down" and "not valid MCP" in fleet.report()[bad]["last_error"]
        listed = {t.name for t in await fleet.describe()}  # `tools list`: the rest is still listed
        assert "get_issue" in listed and not any(n.startswith("bad_") for n in listed)
    finally:
        await fleet.aclose()


async def test_a_server_echoing_its_credential_never_gets_it_into_health_reports_or_logs(tmp_path, caplog):
    control = Control(tmp_path / "c")
    control.set("leak")
    secret = f"s3cr3t-{new_token()}"
    name = unique("leaky")
    env = {"FLEET_CONTROL": str(control.dir), "FLEET_SECRET": "secret:FLEET_SECRET"}
    fleet = McpFleet(make_client({name: fleet_server(control, env=env)}, {"FLEET_SECRET": secret}))
    try:
        with pytest.raises(McpProtocolError) as err:
            await fleet.describe(["echo"])
        assert "[redacted]" in str(err.value) and secret not in str(err.value)
        report = json.dumps(fleet.report())
        assert "listing refused" in report and secret not in report
        assert secret not in caplog.text
    finally:
        await fleet.aclose()
