"""``agentsteps console``: the command serves the pages against the configured Temporal and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from console_support import browser
from mcp_support import free_port

AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))


async def test_agentsteps_console_serves_on_its_port_and_refuses_an_exposed_binding(temporal_env, tmp_path):
    address = temporal_env.client.service_client.config.target_host
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "AGENTSTEPS_STATE_DIR": str(tmp_path)}
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        AGENTSTEPS,
        "console",
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        banner = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert f"http://127.0.0.1:{port}" in banner and address in banner
        async with browser(f"http://127.0.0.1:{port}") as web:
            assert (await web.get("/runs")).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0

    exposed = await asyncio.create_subprocess_exec(
        AGENTSTEPS,
        "console",
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(exposed.communicate(), 60)
    assert exposed.returncode != 0 and b"AGENTSTEPS_CONSOLE_TOKEN" in err


async def test_agentsteps_dev_serves_the_console_beside_its_worker(temporal_env, tmp_path):
    address = temporal_env.client.service_client.config.target_host
    port = free_port()
    # dev is the embedded stack: it finds the test's server on its port (TEMPORAL_ADDRESS would be a cluster).
    env = {
        **{k: v for k, v in os.environ.items() if k != "TEMPORAL_ADDRESS"},
        "AGENTSTEPS_DEV_PORT": address.rsplit(":", 1)[1],
        "AGENTSTEPS_DEV_UI_PORT": str(free_port()),
        "AGENTSTEPS_STATE_DIR": str(tmp_path),
        "AGENTSTEPS_METRICS_PORT": str(free_port()),
        "AGENTSTEPS_TASK_QUEUE": f"dev-{port}",
        "AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": "1",
    }
    process = await asyncio.create_subprocess_exec(
        AGENTSTEPS,
        "dev",
        "--console-port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        banner = ""
        while "Ctrl-C" not in banner:
            line = (await asyncio.wait_for(process.stdout.readline(), 90)).decode()
            assert line, f"dev stopped: {(await process.stderr.read()).decode()[-2000:]}"
            banner += line
        assert f"Console:         http://127.0.0.1:{port}" in banner
        async with browser(f"http://127.0.0.1:{port}") as web:
            assert (await web.get("/approvals")).status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 60) == 0
