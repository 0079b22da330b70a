"""Three MCP servers behind one worker, one of them taken down, hung and brought back during the test.

The ticket tracker over stdio (``tickets``) and over streamable HTTP
(``remote``, declared ``required``), the fleet server (``flaky``) and a
misconfigured server (``broken``). Real Temporal, real HTTP to the scripted
model, real processes. Agents using only healthy servers complete throughout;
agents using the broken one fail typed within its bound; once it is back, new
runs use it with no restart; ``/readyz``, the metrics and ``tools list`` show
each state as it happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from agent_support import make_spec, run_agent, run_agent_failure
from fleet_support import Control, eventually, fleet_server, sample, unique
from mcp_support import (
    free_port,
    http_tracker,
    http_tracker_process,
    new_token,
    seeded_db,
    stdio_tracker,
    write_mcp_config,
)

from agentsteps.contracts.llm.tools import catalog_digest
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.telemetry.server import start_metrics_server
from agentsteps.worker import build_mcp, running_worker

GIVE_UP = 3.0
FAST = {"connect_seconds": 5, "call_seconds": 1, "list_seconds": 5}
BREAKER = {"failures": 2, "open_seconds": 0.5, "max_open_seconds": 1}
RETRY = ActivityPolicy(
    start_to_close_seconds=10, max_attempts=100, initial_interval_seconds=0.2, maximum_interval_seconds=0.5
)


def _script() -> dict:
    def ask(marker: str, tool: str, arguments: dict) -> list[dict]:
        return [
            {
                "match": {"role": "user", "contains": marker},
                "reply": {"tool_calls": [{"name": tool, "arguments": arguments}]},
            },
            {"match": {"tool_result_for": tool}, "reply": {"content": f"{tool} ok"}},
        ]

    return {
        "rules": [
            *ask("[weather]", "get_weather", {"city": "Paris"}),
            *ask("[tickets]", "get_issue", {"id": "PROJ-1"}),
            *ask("[remote]", "remote_get_issue", {"id": "PROJ-2"}),
            *ask("[flaky]", "flaky_echo", {"text": "hi"}),
            *ask("[shout]", "flaky_shout", {"text": "hey"}),
            *ask("[broken]", "broken_thing", {}),
        ]
    }


def _readyz(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class Fleet:
    """The worker side of the test: config, names, and the runs it starts."""

    def __init__(self, client, settings, tmp_path: Path, token: str) -> None:
        self.client, self.tmp_path, self.token = client, tmp_path, token
        self.control = Control(tmp_path / "flaky")
        self.port = free_port()
        db = seeded_db(tmp_path, issues=10)
        self.names = {k: unique(k) for k in ("tickets", "remote", "flaky", "broken")}
        self.http_db = db
        self.config = write_mcp_config(
            tmp_path / "agentsteps.toml",
            {
                self.names["tickets"]: stdio_tracker(db),
                self.names["remote"]: http_tracker(
                    self.port, tool_prefix="remote_", required=True, catalog_ttl_seconds=1, breaker=BREAKER
                ),
                self.names["flaky"]: fleet_server(
                    self.control, tool_prefix="flaky_", give_up_seconds=GIVE_UP, timeouts=FAST, breaker=BREAKER
                ),
                self.names["broken"]: {
                    "transport": "stdio",
                    "command": "/nonexistent/mcp-server",
                    "tool_prefix": "broken_",
                },
            },
        )
        self.settings = settings.model_copy(update={"config_file": self.config})

    def state(self, key: str) -> str:
        return self.mcp.fleet.report()[self.names[key]]["state"]

    async def run(self, marker: str, tool: str):
        spec = make_spec(tools=[tool], tool_policy=RETRY)
        return await run_agent(self.client, self.settings.task_queue, spec, f"{marker} go")

    async def fails(self, marker: str, tool: str):
        spec = make_spec(tools=[tool], tool_policy=RETRY)
        started = time.monotonic()
        error = await run_agent_failure(self.client, self.settings.task_queue, spec, f"{marker} go")
        return error, time.monotonic() - started

    async def healthy_agents_complete(self) -> None:
        results = await asyncio.gather(self.run("[weather]", "get_weather"), self.run("[tickets]", "get_issue"))
        assert [r.status for r in results] == ["completed", "completed"], results
        assert all(not c.is_error for r in results for s in r.steps for c in s.tool_calls)

    def tools_list(self) -> tuple[int, dict]:
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("agentsteps")),
                "tools",
                "list",
                "--json",
                "--config",
                str(self.config),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.returncode, json.loads(done.stdout)


async def test_one_server_down_hung_and_back_never_touches_agents_that_do_not_use_it(
    client, settings, scripted, tmp_path, monkeypatch
):
    token = new_token()
    monkeypatch.setenv("TICKETS_API_TOKEN", token)
    monkeypatch.setenv("TRACKER_EXPECTS", token)
    scripted.set_script(_script())
    fleet = Fleet(client, settings, tmp_path, token)
    fleet.control.set("down")
    remote = contextlib.ExitStack()
    remote.enter_context(http_tracker_process(fleet.http_db, fleet.port, token))
    fleet.mcp = build_mcp(fleet.settings)
    metrics = start_metrics_server(
        0, host="127.0.0.1", ready=fleet.mcp.fleet.ready, details=lambda: {"mcp_servers": fleet.mcp.fleet.report()}
    )
    names = fleet.names
    try:
        async with running_worker(client, fleet.settings, mcp=fleet.mcp):
            # -- flaky down since start, broken misconfigured: both shown, neither fails anyone else.
            await eventually(
                lambda: fleet.state("remote") == "up" and fleet.state("tickets") == "up",
                what="the healthy servers are connected at start",
            )
            status, body = await asyncio.to_thread(_readyz, metrics.url)
            servers = body["mcp_servers"]
            assert status == 200 and body["status"] == "ready"
            assert servers[names["broken"]]["state"] == "misconfigured"
            assert "/nonexistent/mcp-server" in servers[names["broken"]]["last_error"]
            assert servers[names["flaky"]]["state"] in ("down", "circuit_open") and servers[names["flaky"]]["since"]
            assert sample("agentsteps_mcp_server_up", server=names["flaky"]) == 0
            assert sample("agentsteps_mcp_server_up", server=names["tickets"]) == 1
            assert sample("agentsteps_mcp_calls_total", server=names["flaky"], outcome="ok") == 0  # pre-created

            results = await asyncio.gather(
                fleet.run("[weather]", "get_weather"),
                fleet.run("[tickets]", "get_issue"),
                fleet.run("[remote]", "remote_get_issue"),
                fleet.fails("[flaky]", "flaky_echo"),
                fleet.fails("[broken]", "broken_thing"),
            )
            assert [r.status for r in results[:3]] == ["completed"] * 3, results[:3]
            (down, took), (broken, _) = results[3], results[4]
            assert down.type == "McpServerDownError" and down.non_retryable and names["flaky"] in str(down)
            assert took < GIVE_UP + 5, took
            assert broken.type == "McpConfigError" and broken.non_retryable and names["broken"] in str(broken)

            code, listed = await asyncio.to_thread(fleet.tools_list)
            assert code == 0  # the required server is up; the others are shown, not fatal
            assert listed["servers"][names["broken"]]["state"] == "misconfigured"
            assert listed["servers"][names["flaky"]]["state"] == "down"
            assert {"get_issue", "remote_get_issue"} <= {t["name"] for t in listed["tools"]}

            # -- the required server goes away: /readyz says so; agents not using it carry on.
            remote.close()
            await eventually(lambda: fleet.state("remote") != "up", what="the dead HTTP server is noticed")
            status, body = await asyncio.to_thread(_readyz, metrics.url)
            assert status == 503 and body["mcp_servers"][names["remote"]]["state"] in ("down", "circuit_open")
            await fleet.healthy_agents_complete()
            remote.enter_context(http_tracker_process(fleet.http_db, fleet.port, token))
            await eventually(lambda: fleet.state("remote") == "up", what="the HTTP session is re-established")
            assert (await asyncio.to_thread(_readyz, metrics.url))[0] == 200
            assert (await fleet.run("[remote]", "remote_get_issue")).status == "completed"
            assert sample("agentsteps_mcp_reconnects_total", server=names["remote"]) >= 1

            # -- flaky comes back: new runs use it, no restart; a tool it adds is offered at once.
            fleet.control.set("down", on=False)
            await eventually(lambda: fleet.state("flaky") == "up", what="the stdio server is restarted")
            back = await fleet.run("[flaky]", "flaky_echo")
            assert back.status == "completed"
            assert json.loads(back.steps[0].tool_calls[0].content) == {"tool": "echo", "args": {"text": "hi"}}
            [schema] = await fleet.mcp.fleet.describe(["flaky_echo"])
            assert back.catalog_digest == catalog_digest([schema])
            fleet.control.offer("echo", "shout")
            # The server's notifications/tools/list_changed (its TTL is the default 300 s) makes the worker learn it.
            await eventually(
                lambda: fleet.mcp.fleet.known_owner("flaky_shout") == names["flaky"],
                what="the added tool is learnt from list_changed",
            )
            shouted = await fleet.run("[shout]", "flaky_shout")
            assert shouted.status == "completed" and not shouted.steps[0].tool_calls[0].is_error
            assert sample("agentsteps_mcp_server_up", server=names["flaky"]) == 1

            # -- flaky hangs: its runs fail typed within the bound, with no pile of calls; the rest complete.
            fleet.control.set("hang")
            (hung, took), _ = await asyncio.gather(
                fleet.fails("[flaky]", "flaky_echo"), fleet.healthy_agents_complete()
            )
            assert hung.type == "McpServerDownError" and took < GIVE_UP + 5, (hung, took)
            sent = len((fleet.control.dir / "calls").read_text().split())
            assert sent <= 2 + BREAKER["failures"] + 3, sent  # two good calls, then a few probes, not 100 retries
            # Whether a retry met the open circuit or was its half-open probe is timing; the circuit is open now.
            assert fleet.state("flaky") == "circuit_open"
            assert sample("agentsteps_mcp_calls_total", server=names["flaky"], outcome="timeout") >= 2
            fleet.control.set("hang", on=False)
            # Its tools/list answered all along, so only a call closes the circuit: the next run's call, once
            # the open period is over, is the half-open probe.
            await asyncio.sleep(BREAKER["max_open_seconds"] + 0.2)
            assert (await fleet.run("[flaky]", "flaky_echo")).status == "completed"
            assert fleet.state("flaky") == "up"
    finally:
        metrics.stop()
        remote.close()
