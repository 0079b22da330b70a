"""Every command with machine-readable output prints only JSON on stdout, in a versioned, pinned shape.

Each ``--json`` document is one object that names its shape first
(``"schema": "agentsteps/tools-list@1"``) and matches that shape's JSON Schema
in ``docs/cli-json/`` exactly (``pinned``). A shape may gain keys; anything an
old consumer could not read needs a new major, which the last tests here
enforce against the schemas as released (``tests/client_cli/cli_json_released.json``).

Progress, banners and logs go to stderr. The first test lets ``agentsteps run``
start the embedded Temporal server itself (on free ports, so a server other
tests or a developer run on 7233 is never reused), which is where the dev
server's banner used to land in front of the JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from cli_json_support import SCHEMAS, pinned, released, schema_file, shape_schema
from secret_scan import SecretScan
from test_cli import dev_port_env

from agentsteps.cli import json_output
from agentsteps.cli.main import _parser
from agentsteps.contracts.composition.prover import Verdict, check_schema_compat
from agentsteps.scripted_model import Script, ScriptedModelServer

ROOT = Path(__file__).resolve().parents[2]
AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _base_env(tmp_path: Path, base_url: str = "http://127.0.0.1:9/unused") -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTSTEPS_CONFIG", "TEMPORAL_ADDRESS")
    }
    env.update(
        AGENTSTEPS_TASK_QUEUE=f"json-{uuid.uuid4().hex[:8]}",
        AGENTSTEPS_STATE_DIR=str(tmp_path / "state"),
        OPENAI_BASE_URL=base_url,
    )
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
            [AGENTSTEPS, "run", "--spec", "examples/demo_agent.toml", "--input", question, "--json"],
            # The embedded server moved to free ports, as `agentsteps dev --port` does.
            {
                **_base_env(tmp_path, model.url_openai),
                "OPENAI_API_KEY": key,
                "AGENTSTEPS_DEV_PORT": str(_free_port()),
                "AGENTSTEPS_DEV_UI_PORT": str(_free_port()),
            },
        )

    assert done.returncode == 0, done.stderr
    result = pinned(done.stdout, json_output.RUN)
    assert result["status"] == "completed"
    state = tmp_path / "state"
    assert (state / "temporal.db").exists()  # the server really was started here
    # The key stays in the worker: not in the Temporal database file, the payload store or the output.
    assert SecretScan(question).files("state dir", state).leaks()  # the scan reads what the database holds
    SecretScan(key).files("state dir", state).text("stdout", done.stdout).text("stderr", done.stderr).assert_clean()


def test_run_pipeline_json_is_only_json(temporal_env, tmp_path):
    update = {"issue_id": "PROJ-1", "state": "closed", "comment": "Customer confirms the fix."}
    reply = {"issue_id": "PROJ-1", "state": "closed", "message": "Thanks! Ticket PROJ-1 is now closed."}
    script = Script.model_validate(
        {
            "rules": [
                {"match": {"any_contains": "triage customer emails"}, "reply": {"json": update}},
                {"match": {"any_contains": "friendly reply"}, "reply": {"json": reply}},
            ]
        }
    )
    config = tmp_path / "agentsteps.toml"
    config.write_text('[worker]\ntool_factories = ["agentsteps.examples.support_tools:build_registry"]\n')
    email = {"sender": "kim@example.com", "subject": "PROJ-1", "body": "Please close PROJ-1, it works now."}
    with ScriptedModelServer(script) as model:
        env = {**_base_env(tmp_path, model.url_openai), **dev_port_env(temporal_env)}
        done = _run(
            [
                AGENTSTEPS,
                "--config",
                str(config),
                "run",
                "--pipeline",
                "examples/pipelines/support_reply.toml",
                "--input",
                json.dumps(email),
                "--json",
            ],
            env,
        )

    assert done.returncode == 0, done.stderr
    assert pinned(done.stdout, json_output.PIPELINE_RUN)["output"]["issue_id"] == "PROJ-1"


def test_check_json_is_only_json(tmp_path):
    done = _run([AGENTSTEPS, "check", "examples/pipelines/support_reply.toml", "--json"], _base_env(tmp_path))

    assert done.returncode == 0, done.stderr
    assert {e["edge"] for e in pinned(done.stdout, json_output.CHECK)["edges"]} >= {"read_email->update_ticket"}


def test_check_json_of_an_invalid_file_is_the_same_shape(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "broken"\n[[steps]]\nno_such_key = 1\n')
    done = _run([AGENTSTEPS, "check", str(broken), "--json"], _base_env(tmp_path))

    assert done.returncode == 2, done.stderr
    body = pinned(done.stdout, json_output.CHECK)
    assert body["ok"] is False and body["error"] == "InvalidSpecError" and body["violations"]


def test_tools_list_json_is_only_json(tmp_path):
    done = _run([AGENTSTEPS, "tools", "list", "--json"], _base_env(tmp_path))

    assert done.returncode == 0, done.stderr
    listed = pinned(done.stdout, json_output.TOOLS_LIST)
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
    assert isinstance(pinned(done.stdout, json_output.SCHEDULE_LIST)["schedules"], list)


def test_payloads_gc_json_is_only_json(temporal_env, tmp_path):
    env = {**_base_env(tmp_path), "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host}
    done = _run([AGENTSTEPS, "payloads", "gc", "--older-than", "30d", "--json"], env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    report = pinned(done.stdout, json_output.PAYLOADS_GC)
    assert report["deleted"] is False and report["garbage"] == []


# --- the shapes themselves: named, pinned, and changed only compatibly ---


def _json_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every command path whose parser takes ``--json``."""
    found = {path} if any("--json" in a.option_strings for a in parser._actions) else set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _json_commands(sub, (*path, name))
    return found


def test_every_json_command_names_its_shapes_and_each_shape_has_a_schema():
    assert _json_commands(_parser()) == set(json_output.SHAPES)
    current = {shape for shapes in json_output.SHAPES.values() for shape in shapes}
    for shape in current:
        assert schema_file(shape).exists(), f"{shape} has no schema in docs/cli-json/"
        assert shape_schema(shape)["title"] == shape
    # Every file is a shape the CLI prints now, or an older major of one.
    printed_names = {s.split("/", 1)[1].split("@")[0] for s in current}
    for path in SCHEMAS.glob("*.json"):
        assert path.stem.split("@")[0] in printed_names, f"{path.name}: no command prints this shape"


def _opened(node):
    """What a consumer of a shape relies on: its keys, not the absence of others."""
    if isinstance(node, dict):
        return {k: _opened(v) for k, v in node.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(node, list):
        return [_opened(v) for v in node]
    return node


def _readable_by_old_consumers(current: dict, as_released: dict):
    return check_schema_compat(current, _opened(as_released))


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.json")), ids=lambda p: p.stem)
def test_a_shape_changes_only_in_ways_its_released_consumers_can_read(path):
    current = json.loads(path.read_text())
    shape = current["title"]
    as_released = released().get(shape)
    assert as_released is not None, (
        f"{shape} is new: add its schema, as released, to tests/client_cli/cli_json_released.json (and a "
        "CHANGELOG.md entry)"
    )
    verdict = _readable_by_old_consumers(current, as_released)
    assert verdict.verdict is Verdict.proven, (
        f"{path.name} changed so that a consumer of {shape} as released could fail "
        f"({verdict.verdict}: at {verdict.path}: {verdict.reason}"
        f"{'; e.g. ' + json.dumps(verdict.counterexample.value) if verdict.counterexample else ''}). "
        f"Print a new major instead (docs/compatibility.md)."
    )


def test_the_released_check_tells_a_new_key_from_a_removed_or_retyped_one():
    as_released = released()[json_output.TOOLS_LIST]
    added = copy.deepcopy(as_released)
    added["properties"]["count"] = {"type": "integer"}
    removed = copy.deepcopy(as_released)
    removed["required"].remove("servers")
    del removed["properties"]["servers"]
    retyped = copy.deepcopy(as_released)
    retyped["$defs"]["ServerHealth"]["properties"]["required"] = {"type": "string"}
    as_list = {"type": "array", "items": as_released["$defs"]["ToolSchema"]}  # what 'tools list --json' once printed

    assert _readable_by_old_consumers(added, as_released).verdict is Verdict.proven
    for changed in (removed, retyped, as_list):
        assert _readable_by_old_consumers(changed, as_released).verdict is Verdict.refuted


def test_a_body_cannot_carry_a_schema_key_of_its_own():
    with pytest.raises(ValueError):
        json_output.versioned(json_output.RUN, {"schema": "mine"})
