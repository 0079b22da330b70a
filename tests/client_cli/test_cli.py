"""The ``agentsteps`` command as a user runs it: a separate process, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agentsteps.scripted_model import Script, ScriptedModelServer

ROOT = Path(__file__).resolve().parents[2]
AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))


@pytest.fixture
def demo_model():
    script = Script.model_validate_json((ROOT / "examples" / "demo_script.json").read_text())
    with ScriptedModelServer(script) as server:
        yield server


def dev_port_env(temporal_env) -> dict[str, str]:
    """The test server as a running embedded stack (as `agentsteps dev --port N` leaves it), not a cluster."""
    host, _, port = temporal_env.client.service_client.config.target_host.rpartition(":")
    assert host in ("127.0.0.1", "localhost"), host
    return {"AGENTSTEPS_DEV_PORT": port}


def _env(temporal_env, tmp_path, base_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTSTEPS_CONFIG", "TEMPORAL_ADDRESS")
    }
    env.update(
        **dev_port_env(temporal_env),
        AGENTSTEPS_TASK_QUEUE=f"cli-{uuid.uuid4().hex[:8]}",
        AGENTSTEPS_STATE_DIR=str(tmp_path / "state"),
        OPENAI_BASE_URL=base_url,
    )
    return env


def _agentsteps(*args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([AGENTSTEPS, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180)


def test_run_with_json_prints_exactly_one_result_object(temporal_env, demo_model, tmp_path):
    done = _agentsteps(
        "run",
        "--spec",
        "examples/demo_agent.toml",
        "--input",
        "weather in Paris and Tokyo?",
        "--json",
        env=_env(temporal_env, tmp_path, demo_model.url_openai),
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed"
    assert result["output"]["warmest_city"] == "Tokyo"
    assert "step" in done.stderr  # progress goes to stderr, never into the JSON


def test_run_rejects_an_invalid_spec_before_starting_and_names_the_field(temporal_env, demo_model, tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('tools = ["get_weather"]\n[model]\nmodel = "latest"\ntemperature = 3\n')
    done = _agentsteps(
        "run", "--spec", str(spec), "--input", "hi", env=_env(temporal_env, tmp_path, demo_model.url_openai)
    )

    assert done.returncode == 2
    assert "$.model.temperature" in done.stderr and "$.model.model" in done.stderr
    assert demo_model.requests == []


def test_demo_runs_offline_against_an_existing_server_and_says_so(temporal_env, demo_model, tmp_path):
    done = _agentsteps("demo", env=_env(temporal_env, tmp_path, "http://127.0.0.1:9/unused"), cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "offline scripted model" in done.stdout
    assert "status: completed" in done.stdout
    assert "contract violations handled" in done.stdout
    assert "Stalled-ticket monitor" in done.stdout
    assert "Demo finished" in done.stdout


def test_unknown_config_file_is_a_clear_error(tmp_path):
    env = {**os.environ, "AGENTSTEPS_CONFIG": ""}
    done = _agentsteps("--config", str(tmp_path / "missing.toml"), "tools", "list", env=env)

    assert done.returncode == 2
    assert "missing.toml" in done.stderr


def test_tools_list_shows_which_tools_need_approval_and_their_delivery_policy(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AGENTSTEPS_CONFIG"}
    done = _agentsteps("tools", "list", env={**env, "AGENTSTEPS_STATE_DIR": str(tmp_path)}, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.split("\n\n")[0].splitlines()}
    assert rows["TOOL"] == ["TOOL", "SOURCE", "EFFECTS", "APPROVAL", "DELIVERY"]
    assert rows["refund_order"] == ["refund_order", "python", "writes", "required", "key"]
    assert rows["get_weather"] == ["get_weather", "python", "read-only", "-", "retry"]
