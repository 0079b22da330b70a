"""Workers on one task queue agree before they poll: real `agentsteps worker` processes on one dev server.

The first worker founds the queue in its registry; a second one with other tools, another payload store
or another snapshot key is refused with one line naming what differs, and one with the same config joins.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))
KEY = "queue-agreement-key-0123456789abcdef"
DEMO_TOOLS = '[worker]\ntool_factories = ["agentsteps.examples.demo_tools:build_registry"]\n'


def _env(port: int, queue: str, state: Path, key: str = KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSTEPS_", "AWS_", "TEMPORAL_"))}
    env.update(
        AGENTSTEPS_DEV_PORT=str(port),
        AGENTSTEPS_TASK_QUEUE=queue,
        AGENTSTEPS_STATE_DIR=str(state),
        AGENTSTEPS_METRICS_PORT="0",
        AGENTSTEPS_SNAPSHOT_KEY=key,
    )
    return env


def _worker(cwd: Path, env: dict[str, str], config: str | None = None) -> subprocess.Popen[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (cwd / "agentsteps.toml").write_text(config)
    return subprocess.Popen(
        [AGENTSTEPS, "worker"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    )


def _refusal(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "QueueMismatchError" in lines[0], err
    return lines[0]


@pytest.fixture
def port(temporal_env) -> int:
    return int(temporal_env.client.service_client.config.target_host.rsplit(":", 1)[1])


def test_a_worker_that_disagrees_with_the_queue_is_refused_naming_what_differs_and_one_that_agrees_joins(
    port, tmp_path
):
    queue = f"agree-{uuid.uuid4().hex[:8]}"
    shared = tmp_path / "shared-state"
    first = _worker(tmp_path / "first", _env(port, queue, shared), DEMO_TOOLS)
    try:
        assert first.stdout is not None and "worker on" in first.stdout.readline()
        other_tools = _worker(tmp_path / "no-tools", _env(port, queue, shared))
        other_store = _worker(tmp_path / "other-store", _env(port, queue, tmp_path / "other-state"), DEMO_TOOLS)
        same = _worker(tmp_path / "same", _env(port, queue, shared), DEMO_TOOLS)
        other_key = _worker(
            tmp_path / "other-key", _env(port, queue, shared, key="another-key-0123456789abcdef0"), DEMO_TOOLS
        )
        tools_line = _refusal(other_tools)
        assert "other tools" in tools_line and "payload store" not in tools_line and "snapshot key" not in tools_line
        store_line = _refusal(other_store)
        assert "another payload store" in store_line and str(shared) in store_line
        assert "snapshot key" not in store_line and "other tools" not in store_line
        key_line = _refusal(other_key)
        assert "another snapshot key" in key_line and "payload store" not in key_line and "other tools" not in key_line
        for line in (tools_line, store_line, key_line):
            assert "--replace-fleet" in line and "AGENTSTEPS_TASK_QUEUE" in line
        assert same.stdout is not None and "worker on" in same.stdout.readline()
        same.terminate()
        same.communicate(timeout=240)
    finally:
        first.terminate()
        first.communicate(timeout=240)
