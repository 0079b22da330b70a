"""Each tool name resolves to exactly one MCP server, the same for describe and call, on every worker.

Two real servers (``mcp_fleet_server.py``) offer one name; each fleet below is
fresh, as on a worker that has served nothing yet, so no answer may come from
what a cache happens to hold.
"""

from __future__ import annotations

import pytest
from fleet_support import Control, fleet_server, unique
from mcp_support import make_client, tool_call
from temporalio.exceptions import ApplicationError

from agentsteps.activities.mcp import McpFleet, McpToolSource
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.llm.tools import ToolsDescribeInput
from agentsteps.contracts.mcp import McpConfigError, McpUnavailableError
from agentsteps.worker import load_registry


def _fleet(servers) -> McpFleet:
    return McpFleet(make_client(servers, {}))


def _calls(control: Control) -> int:
    path = control.dir / "calls"
    return len(path.read_text().split()) if path.exists() else 0


async def test_two_servers_offering_one_name_is_a_config_error_for_describe_and_call(tmp_path):
    first, second = Control(tmp_path / "a"), Control(tmp_path / "b")
    first.offer("echo")
    second.offer("echo", "shout")
    a, b = unique("a"), unique("b")
    fleet = _fleet({a: fleet_server(first), b: fleet_server(second)})
    tools = ToolActivities(load_registry(WorkerSettings(tool_factories=[])), [McpToolSource(fleet)])
    try:
        with pytest.raises(McpConfigError) as described:
            await fleet.describe(["echo"])
        assert a in str(described.value) and b in str(described.value)
        with pytest.raises(ApplicationError) as called:
            await tools.call(tool_call("echo", {"text": "hi"}))
        assert called.value.type == "McpConfigError" and called.value.non_retryable
        assert _calls(first) == 0 and _calls(second) == 0, "an ambiguous name reached a server"
        # A name only one of them offers resolves, to that one, for describe and call alike.
        [schema] = await tools.describe(ToolsDescribeInput(names=["shout"]))
        assert schema.source.endswith(b)
        assert not (await tools.call(tool_call("shout", {"text": "hi"}))).is_error
        assert (_calls(first), _calls(second)) == (0, 1)
    finally:
        await fleet.aclose()


async def test_the_call_goes_to_the_server_the_name_was_described_from(tmp_path):
    """``b`` lists ``echo`` in its config but does not offer it (a release renamed it); ``a`` does:
    describe and call both reach ``a``."""
    first, second = Control(tmp_path / "a"), Control(tmp_path / "b")
    first.offer("echo")
    second.offer("other")
    a, b = unique("z-offers"), unique("a-lists")  # the lister sorts first: order decides nothing
    fleet = _fleet({a: fleet_server(first, catalog_ttl_seconds=3600), b: fleet_server(second, tools=["echo"])})
    try:
        [schema] = await fleet.describe(["echo"])
        assert schema.source.endswith(a)
        assert not (await fleet.call(tool_call("echo", {"text": "x"}))).is_error
        assert (_calls(first), _calls(second)) == (1, 0)
    finally:
        await fleet.aclose()


async def test_a_down_server_that_may_offer_the_name_fails_it_retryable_instead_of_routing_by_who_is_up(tmp_path):
    up, down = Control(tmp_path / "up"), Control(tmp_path / "down")
    up.offer("echo")
    down.set("down")
    a, b = unique("up"), unique("down")
    fleet = _fleet({a: fleet_server(up), b: fleet_server(down, timeouts={"connect_seconds": 3})})
    try:
        with pytest.raises(McpUnavailableError, match=b):
            await fleet.describe(["echo"])
        assert _calls(up) == 0
    finally:
        await fleet.aclose()


async def test_a_python_tool_clashing_with_an_mcp_tool_is_refused_by_a_worker_with_an_empty_cache(tmp_path):
    control = Control(tmp_path / "c")
    control.offer("get_weather")
    name = unique("clash")
    fleet = _fleet({name: fleet_server(control)})
    tools = ToolActivities(load_registry(WorkerSettings()), [McpToolSource(fleet)])
    try:
        assert fleet.known_owner("get_weather") is None  # nothing cached: this worker has served nothing
        with pytest.raises(ApplicationError) as refused:
            await tools.describe(ToolsDescribeInput(names=["get_weather"]))
        assert refused.value.type == "ToolConfigError" and refused.value.non_retryable
        assert "get_weather" in str(refused.value) and name in str(refused.value)
    finally:
        await fleet.aclose()


async def test_a_python_only_run_is_not_failed_by_a_down_server_that_may_offer_its_name(tmp_path):
    control = Control(tmp_path / "c")
    control.set("down")
    fleet = _fleet({unique("down"): fleet_server(control, timeouts={"connect_seconds": 3})})
    tools = ToolActivities(load_registry(WorkerSettings()), [McpToolSource(fleet)])
    try:
        [schema] = await tools.describe(ToolsDescribeInput(names=["get_weather"]))
        assert schema.source == "python"
    finally:
        await fleet.aclose()
