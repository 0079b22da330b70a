"""Our MCP client against published MCP servers this project did not write, over stdio, offline.

The server is the reference time server from modelcontextprotocol/servers
(PyPI ``mcp-server-time``), pinned in ``tests/mcp_thirdparty/*.txt`` and
installed by ``make mcp-thirdparty`` (run by ``.ci/run`` and ``make test``)
into its own venv under ``.venv-mcp-thirdparty/``, so its MCP SDK never
mixes with ours. Two builds of it: one on the SDK 2.x ``MCPServer`` (output
schemas, structured content), one on the SDK 1.x low-level ``Server`` (text
only, an older protocol handshake), which is what most deployed servers are.

Absent servers skip the tests locally, and fail them in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from mcp_support import make_client, tool_call, write_mcp_config

ROOT = Path(__file__).resolve().parents[2]
PINS = Path(__file__).parents[1] / "mcp_thirdparty"
VENVS = ROOT / ".venv-mcp-thirdparty"
TIME_TOOLS = {"get_current_time", "convert_time"}

# What convert_time must return, whatever the date: neither zone has daylight saving.
CONVERSION_RESULT_SCHEMA = {
    "type": "object",
    "required": ["source", "target", "time_difference"],
    "properties": {
        "source": {
            "type": "object",
            "required": ["timezone", "datetime", "day_of_week", "is_dst"],
            "properties": {
                "timezone": {"const": "UTC"},
                "datetime": {"pattern": "T12:00:00\\+00:00$"},
                "is_dst": {"const": False},
            },
        },
        "target": {
            "type": "object",
            "required": ["timezone", "datetime", "day_of_week", "is_dst"],
            "properties": {
                "timezone": {"const": "Asia/Kathmandu"},
                "datetime": {"pattern": "T17:45:00\\+05:45$"},
                "is_dst": {"const": False},
            },
        },
        "time_difference": {"const": "+5.75h"},
    },
}


def _server_executable(build: str) -> Path:
    """The installed server of ``build``, or skip (fail in CI) with how to install it."""
    venv = VENVS / build
    executable = venv / "bin" / "mcp-server-time"
    stamp = venv / "installed.txt"
    pinned = (PINS / f"{build}.txt").read_text()
    if executable.is_file() and stamp.is_file() and stamp.read_text() == pinned:
        return executable
    problem = "is not installed" if not executable.is_file() else "is not the pinned version"
    message = f"third-party MCP server {venv.relative_to(ROOT)} {problem}: run `make mcp-thirdparty`"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _config(build: str) -> dict:
    return {
        "transport": "stdio",
        "command": str(_server_executable(build)),
        "args": ["--local-timezone", "UTC"],
        "timeouts": {"connect_seconds": 30, "call_seconds": 30},
    }


@pytest.fixture(params=["time-sdk2", "time-sdk1"])
async def time_server(request):
    client = make_client({"time": _config(request.param)}, {})
    yield request.param, client
    await client.aclose()


async def test_discovery_lists_the_published_servers_tools_as_tool_schemas(time_server):
    build, client = time_server
    tools = {t.name: t for t in await client.list_tools("time")}
    assert set(tools) == TIME_TOOLS
    convert = tools["convert_time"]
    assert convert.source == "mcp:time"
    assert set(convert.parameters["required"]) == {"source_timezone", "time", "target_timezone"}
    if build == "time-sdk2":
        # The SDK 2 build declares its result type and marks its tools read-only.
        assert set(convert.output_schema["required"]) == {"source", "target", "time_difference"}
        assert not convert.side_effects
    else:
        assert convert.output_schema is None


async def test_a_real_call_returns_a_validated_structured_result(time_server):
    build, client = time_server
    result = await client.call_tool(
        "time",
        tool_call("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kathmandu"}),
    )
    assert not result.is_error, result.content
    # Structured either way: validated content from SDK 2, JSON text parsed from SDK 1.
    Draft202012Validator(CONVERSION_RESULT_SCHEMA).validate(result.structured)
    assert json.loads(result.content) == result.structured
    if build == "time-sdk2":
        [schema] = [t.output_schema for t in await client.list_tools("time") if t.name == "convert_time"]
        Draft202012Validator(schema).validate(result.structured)


async def test_the_published_servers_tool_errors_come_back_as_error_results(time_server):
    _, client = time_server
    bad_zone = await client.call_tool("time", tool_call("get_current_time", {"timezone": "Mars/Olympus_Mons"}))
    assert bad_zone.is_error and bad_zone.structured is None
    unknown = await client.call_tool("time", tool_call("get_weather", {}))
    assert unknown.is_error and "get_current_time" in unknown.content


async def test_tools_cli_calls_the_published_server_through_the_worker_code(tmp_path):
    command = _server_executable("time-sdk2")
    config = tmp_path / "agentsteps.toml"
    write_mcp_config(
        config,
        {
            "time": {
                "transport": "stdio",
                "command": str(command),
                "args": ["--local-timezone", "UTC"],
                "tool_prefix": "time_",
            }
        },
    )
    agentsteps = [str(Path(sys.executable).with_name("agentsteps"))]
    listed = subprocess.run(
        [*agentsteps, "tools", "list", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert listed.returncode == 0, listed.stderr
    names = {t["name"] for t in json.loads(listed.stdout)["tools"] if t["source"] == "mcp:time"}
    assert names == {"time_get_current_time", "time_convert_time"}
    called = subprocess.run(
        [
            *agentsteps,
            "tools",
            "call",
            "time_convert_time",
            "--config",
            str(config),
            "--args",
            json.dumps({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kathmandu"}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert called.returncode == 0, called.stderr
    assert '"+5.75h"' in called.stdout
