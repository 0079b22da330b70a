"""SIGTERM the moment ``agentsteps worker`` shows any sign of life: it drains, it is never killed.

Kubernetes may stop a pod while it is still starting (a rollout overtaking
itself, a node drained). The first thing a probe can see is the metrics port;
a SIGTERM then, before the worker polls or prints its banner, must end the
process cleanly (exit 0) with the drain message, every time.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

AGENTSTEPS = Path(sys.executable).with_name("agentsteps")
# Each try is a worker start-up (seconds of imports): 3 in the suite (10 made it the longest test there);
# `AGENTSTEPS_SIGTERM_TRIES=50 pytest tests/e2e/test_worker_sigterm_at_start.py` is the long probe.
TRIES = int(os.environ.get("AGENTSTEPS_SIGTERM_TRIES", "3"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=0.5)
    except httpx.TransportError:
        return False
    return True


def _sigterm_at_first_sign_of_life(address: str, state_dir: Path) -> tuple[int, str, bool]:
    """Start a worker, SIGTERM it as soon as its port answers (or it exits); its status, stderr, and
    whether the port ever answered before it exited."""
    port = _free_port()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "AGENTSTEPS_TASK_QUEUE": f"sigterm-{uuid.uuid4().hex[:8]}",
        "AGENTSTEPS_STATE_DIR": str(state_dir),
        "AGENTSTEPS_SINGLE_WORKER": "1",
        "AGENTSTEPS_METRICS_PORT": str(port),
    }
    proc = subprocess.Popen(
        [str(AGENTSTEPS), "worker"],
        env=env,
        cwd=state_dir.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    answered = False
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if _answers(port):
                answered = True
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, answered


@pytest.mark.timeout(150 * TRIES)  # worker start-ups: imports alone take seconds on a loaded machine
async def test_sigterm_right_after_start_always_drains(temporal_env, tmp_path):
    address = temporal_env.client.service_client.config.target_host
    outcomes = []
    for attempt in range(TRIES):
        state_dir = tmp_path / f"state{attempt}"
        state_dir.mkdir()
        outcomes.append(_sigterm_at_first_sign_of_life(address, state_dir))
    for status, err, answered in outcomes:
        assert answered, f"the worker exited before its port answered: {err}"
        assert status == 0, f"killed instead of drained (status {status}): {err[-2000:]}"
        assert "stopping: no new tasks" in err, err[-2000:]
        assert "Traceback" not in err, err[-2000:]
