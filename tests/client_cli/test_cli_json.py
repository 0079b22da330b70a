"""Every command with machine-readable output prints only JSON on stdout: each test parses it with ``json.loads``.

Progress, banners and logs go to stderr. The first test lets ``agentsteps run``
start the embedded Temporal server itself (on free ports, so a server other
tests or a developer run on 7233 is never reused), which is where the dev
server's banner used to land in front of the JSON.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agentsteps.scripted_model import Script, ScriptedModelServer

from secret_scan import SecretScan

ROOT = Path(__file__).resolve().parents[2]
AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))

# Runs the real CLI in a fresh process, with the embedded server moved to free ports.
_ON_FREE_PORTS = """
import sys
import agentsteps.client.dev_server as dev_server
dev_server.DEV_SERVER_PORT, dev_server.UI_PORT = int(sys.argv[1]), int(sys.argv[2])
from agentsteps.cli import main
main(sys.argv[3:])
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _base_env(tmp_path: Path, base_url: str = "http://127.0.0.1:9/unused") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTSTEPS_CONFIG", "TEMPORAL_ADDRESS")}
    env.update(AGENTSTEPS_TASK_QUEUE=f"json-{uuid.uuid4().hex[:8]}", AGENTSTEPS_STATE_DIR=str(tmp_path / "state"),
               OPENAI_BASE_URL=base_url)
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=240)


@pytest.fixture
def demo_model():
    script = Script.model_validate_json((ROOT / "examples" / "demo_script.json").read_text())
    with ScriptedModelServer(script) as server:
        yield server


def test_run_json_is_only_json_when_it_starts_the_embedded_server_itself(tmp_path):
    key = "sk-cli-" + uuid.uuid4().hex
    script = json.loads((ROOT / "examples" / "demo_script.json").read_text())
    script["api_key"] = key  # the model answers only requests that carry the key
    question = "weather in Paris and Tokyo? " + uuid.uuid4().hex
    with ScriptedModelServer(Script.model_validate(script)) as model:
        done = _run(
            [sys.executable, "-c", _ON_FREE_PORTS, str(_free_port()), str(_free_port()),
             "run", "--spec", "examples/demo_agent.toml", "--input", question, "--json"],
            {**_base_env(tmp_path, model.url_openai), "OPENAI_API_KEY": key},
        )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed"
    state = tmp_path / "state"
    assert (state / "temporal.db").exists()  # the server really was started here
    # The key stays in the worker: not in the Temporal database file, the payload store or the output.
    assert SecretScan(question).files("state dir", state).leaks()  # the scan reads what the database holds
    SecretScan(key).files("state dir", state).text("stdout", done.stdout).text("stderr", done.stderr).assert_clean()


def test_run_pipeline_json_is_only_json(temporal_env, tmp_path):
    update = {"issue_id": "PROJ-1", "state": "closed", "comment": "Customer confirms the fix."}
    reply = {"issue_id": "PROJ-1", "state": "closed", "message": "Thanks! Ticket PROJ-1 is now closed."}
    script = Script.model_validate({"rules": [
        {"match": {"any_contains": "triage customer emails"}, "reply": {"json": update}},
        {"match": {"any_contains": "friendly reply"}, "reply": {"json": reply}},
    ]})
    config = tmp_path / "agentsteps.toml"
    config.write_text('[worker]\ntool_factories = ["agentsteps.examples.support_tools:build_registry"]\n')
    email = {"sender": "kim@example.com", "subject": "PROJ-1", "body": "Please close PROJ-1, it works now."}
    with ScriptedModelServer(script) as model:
        env = {**_base_env(tmp_path, model.url_openai),
               "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host}
        done = _run([AGENTSTEPS, "--config", str(config), "run", "--pipeline", "examples/pipelines/support_reply.toml",
                     "--input", json.dumps(email), "--json"], env)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"]["issue_id"] == "PROJ-1"


def test_check_json_is_only_json(tmp_path):
    done = _run([AGENTSTEPS, "check", "examples/pipelines/support_reply.toml", "--json"], _base_env(tmp_path))

    assert done.returncode == 0, done.stderr
    assert {e["edge"] for e in json.loads(done.stdout)["edges"]} >= {"read_email->update_ticket"}


def test_tools_list_json_is_only_json(tmp_path):
    done = _run([AGENTSTEPS, "tools", "list", "--json"], _base_env(tmp_path))

    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert "get_weather" in {t["name"] for t in listed["tools"]} and listed["servers"] == {}


def test_tools_call_prints_the_result_as_json(tmp_path):
    done = _run([AGENTSTEPS, "tools", "call", "get_weather", "--args", '{"city": "Paris"}'], _base_env(tmp_path))

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["city"] == "Paris"


def test_schema_is_only_json(tmp_path):
    done = _run([AGENTSTEPS, "schema", "AgentResult"], _base_env(tmp_path))

    assert done.returncode == 0, done.stderr
    assert "properties" in json.loads(done.stdout)


def test_schedule_list_json_is_only_json(temporal_env, tmp_path):
    env = {**_base_env(tmp_path), "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host}
    done = _run([AGENTSTEPS, "schedule", "list", "--json"], env)

    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), list)
