"""SIGTERM during a slow model call: readiness drops first, the call finishes, nothing is sent twice.

The worker is the real ``agentsteps worker`` command in its own process; the
model is the scripted server, which counts every request it receives.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
from agent_support import make_spec
from process_support import kill, wait_for

from agentsteps.client.settings import load_settings
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy

AGENTSTEPS = Path(sys.executable).with_name("agentsteps")
MODEL_DELAY_SECONDS = 4.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _readyz(port: int) -> int | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code
    except httpx.TransportError:
        return None


def _start_worker(address: str, task_queue: str, base_url: str, state_dir: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "AGENTSTEPS_TASK_QUEUE": task_queue,
        "AGENTSTEPS_STATE_DIR": str(state_dir),
        "AGENTSTEPS_SINGLE_WORKER": "1",
        "AGENTSTEPS_METRICS_PORT": str(port),
        "OPENAI_BASE_URL": base_url,
        "AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": "30",
    }
    proc = subprocess.Popen(
        [str(AGENTSTEPS), "worker"],
        env=env,
        cwd=state_dir.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while _readyz(port) != 200:
        assert proc.poll() is None, f"the worker exited: {proc.stderr.read() if proc.stderr else ''}"
        assert time.monotonic() < deadline, "the worker never became ready"
        time.sleep(0.1)
    return proc, port


async def test_sigterm_mid_llm_call_lets_it_finish_and_a_new_worker_completes_the_run_without_resending(
    temporal_env, client, scripted, tmp_path
):
    scripted.set_script({"replies": [{"content": "slow but paid for", "delay_seconds": MODEL_DELAY_SECONDS}]})
    address = temporal_env.client.service_client.config.target_host
    task_queue = f"stop-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    first, first_port = _start_worker(address, task_queue, scripted.url_openai, state_dir)
    second = None
    spec = make_spec(tools=[], llm_policy=ActivityPolicy(start_to_close_seconds=60, max_attempts=3))
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="take your time"),
        id=f"stop-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )
    try:
        await wait_for(lambda: len(scripted.requests) == 1)
        sent_at = time.monotonic()
        first.send_signal(signal.SIGTERM)
        # Not ready before anything else: no new work is routed to a stopping pod.
        await wait_for(lambda: _readyz(first_port) in (503, None), timeout=5)
        assert first.poll() is None or time.monotonic() - sent_at >= MODEL_DELAY_SECONDS - 1.5
        # It drains: the process outlives the SIGTERM until the slow reply came back, then exits cleanly.
        await wait_for(lambda: first.poll() is not None, timeout=40)
        assert time.monotonic() - sent_at >= MODEL_DELAY_SECONDS - 1.5, "the worker did not wait for the call"
        assert first.returncode == 0, first.stderr.read() if first.stderr else ""
        second, _ = _start_worker(address, task_queue, scripted.url_openai, state_dir)
        result = await asyncio.wait_for(handle.result(), timeout=60)
    finally:
        kill(first)
        if second is not None:
            kill(second)

    assert result.status == "completed"
    assert result.output == "slow but paid for"
    assert len(scripted.requests) == 1, "the model call was sent again"


def test_graceful_shutdown_outlasts_the_llm_call_and_is_configurable():
    default = WorkerSettings().graceful_shutdown_seconds
    assert default > ActivityPolicy().start_to_close_seconds
    assert load_settings(None, {"AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": "42"}).graceful_shutdown_seconds == 42


def test_a_negative_or_garbage_graceful_shutdown_is_a_config_error():
    from agentsteps.contracts import InvalidSpecError

    for bad in ("-1", "soon"):
        try:
            load_settings(None, {"AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": bad})
        except InvalidSpecError as exc:
            assert "graceful_shutdown_seconds" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")
