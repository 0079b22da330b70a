"""``agentsteps worker`` reports its MCP servers: a misconfigured one in its log at start, each in ``/readyz``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from fleet_support import Control, fleet_server
from mcp_support import free_port, write_mcp_config


def _readyz(port: int) -> tuple[int, dict] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return None  # not serving yet


def _until(port: int, check, timeout: float = 60.0) -> tuple[int, dict]:
    deadline = time.monotonic() + timeout
    while True:
        answer = _readyz(port)
        if answer is not None and check(*answer):
            return answer
        assert time.monotonic() < deadline, f"/readyz never matched; last: {answer}"
        time.sleep(0.2)


def test_the_worker_logs_a_misconfigured_server_and_readyz_follows_its_required_server(temporal_env, tmp_path):
    control = Control(tmp_path / "c")
    control.set("down")
    config = write_mcp_config(
        tmp_path / "agentsteps.toml",
        {
            "needed": fleet_server(
                control, required=True, breaker={"failures": 1, "open_seconds": 0.3, "max_open_seconds": 0.5}
            ),
            "broken": {"transport": "http", "url": "http:///mcp", "tool_prefix": "b_"},
        },
    )
    port = free_port()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENTSTEPS_SINGLE_WORKER": "1",
        "AGENTSTEPS_METRICS_PORT": str(port),
        "AGENTSTEPS_STATE_DIR": str(tmp_path / "state"),
        "AGENTSTEPS_TASK_QUEUE": f"fleet-{uuid.uuid4().hex[:8]}",
    }
    worker = subprocess.Popen(
        [str(Path(sys.executable).with_name("agentsteps")), "--config", str(config), "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        status, body = _until(
            port, lambda status, body: body["mcp_servers"]["needed"]["last_error"] != "not connected yet"
        )
        assert status == 503 and body["status"] == "not ready"
        assert body["mcp_servers"]["needed"]["state"] in ("down", "circuit_open")
        assert body["mcp_servers"]["needed"]["required"] is True
        assert body["mcp_servers"]["broken"]["state"] == "misconfigured"
        assert "has no host" in body["mcp_servers"]["broken"]["last_error"]

        control.set("down", on=False)  # the required server comes back: ready, with the optional one still broken
        status, body = _until(port, lambda status, body: status == 200)
        assert body["mcp_servers"]["needed"] == {**body["mcp_servers"]["needed"], "state": "up", "last_error": None}
        assert body["mcp_servers"]["broken"]["state"] == "misconfigured"
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            _, stderr = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            _, stderr = worker.communicate()
    assert "mcp server 'broken' is misconfigured: url 'http:///mcp' has no host" in stderr
