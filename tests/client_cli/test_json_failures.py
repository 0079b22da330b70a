"""Every ``--json`` command keeps stdout to exactly one JSON document when it fails, too.

A failure used to print its line on stderr and nothing on stdout, and ``replay --check --json`` put the
Temporal core's ANSI "Failing workflow task ... Nondeterminism" warnings on stdout exactly when the gate
fired. Each command runs here in a failing outcome, as a separate process; its stdout must parse as one
JSON object of a shape it names (``agentsteps/error@1`` when it failed before its own document), and the
failure's line stays on stderr.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_json_support import pinned
from test_cli import AGENTSTEPS, ROOT

from agentsteps.cli import json_output
from agentsteps.cli.json_stdout import command_of, failure_body

HISTORIES = ROOT / "tests" / "histories"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSTEPS_CONFIG", "TEMPORAL_ADDRESS")}
    env["AGENTSTEPS_STATE_DIR"] = str(tmp_path / "state")
    return env


def tampered_histories(tmp_path: Path) -> Path:
    """A real recorded history whose first two activities are swapped: this build cannot replay it."""
    data = json.loads((HISTORIES / "tool_mode.json").read_text())
    scheduled = [e for e in data["events"] if "activityTaskScheduledEventAttributes" in e]
    first, second = (e["activityTaskScheduledEventAttributes"]["activityType"] for e in scheduled[:2])
    first["name"], second["name"] = second["name"], first["name"]
    folder = tmp_path / "histories"
    folder.mkdir()
    (folder / "tampered.json").write_text(json.dumps(data))
    shutil.copy(HISTORIES / "pipeline.json", folder / "pipeline.json")
    return folder


def failing_commands(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Command -> (its arguments in a failing outcome, the shape its stdout must be)."""
    missing = str(tmp_path / "missing.toml")
    error = json_output.ERROR
    return {
        "run": (["run", "--spec", str(tmp_path / "nope.toml"), "--input", "x", "--json"], error),
        "run --pipeline": (["run", "--pipeline", str(tmp_path / "nope.toml"), "--input", "{}", "--json"], error),
        "check": (["check", str(tmp_path / "nope.toml"), "--json"], json_output.CHECK),
        "tools list": (["--config", missing, "tools", "list", "--json"], error),
        "schedule": (["--config", missing, "schedule", "list", "--json"], error),
        "payloads gc": (["payloads", "gc", "--older-than", "soon", "--json"], error),
        "replay --check": (
            ["replay", "--check", "--histories", str(tampered_histories(tmp_path)), "--json"],
            json_output.REPLAY_CHECK,
        ),
        "replay": (["--config", missing, "replay", "some-run", "--model", "openai:gpt-4o", "--json"], error),
        "fork": (["--config", missing, "fork", "some-run", "--at-step", "0", "--json"], error),
        "quota show": (["--config", missing, "quota", "show", "q", "--json"], error),
        "quota set": (["--config", missing, "quota", "set", "q", "--rpm", "5", "--json"], error),
        "budget show": (["--config", missing, "budget", "show", "t", "--json"], error),
        "budget set": (["--config", missing, "budget", "set", "t", "--weight", "2", "--json"], error),
    }


def test_every_json_command_that_fails_prints_exactly_one_json_document_on_stdout(tmp_path):
    commands = failing_commands(tmp_path)
    # Every command that takes --json is here.
    assert {command_of(args) for args, _ in commands.values()} == {" ".join(key) for key in json_output.SHAPES}
    env = _env(tmp_path)

    def run(args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([AGENTSTEPS, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip(commands, pool.map(run, [args for args, _ in commands.values()]), strict=True))

    for name, (_, shape) in commands.items():
        result = done[name]
        assert result.returncode != 0, f"{name} was meant to fail: {result.stdout}"
        body = pinned(result.stdout, shape)  # exactly one JSON document, of the shape named
        assert "\x1b[" not in result.stdout, f"{name}: terminal colours on stdout"
        if shape == json_output.ERROR:
            assert body["exit_code"] == result.returncode and body["error"]["message"], name
            assert body["error"]["message"] in result.stderr, f"{name}: the same line is on stderr for a person"
    replayed = done["replay --check"]
    assert "Nondeterminism" in replayed.stderr, "the SDK's warnings go to stderr"


@pytest.mark.fast
def test_the_error_document_names_the_failure_the_command_printed_last():
    lines = ["WARNING temporalio.worker: something", "run failed: BudgetExceededError: token budget: 12 > 10"]
    assert failure_body("run", 1, lines) == {
        "command": "run",
        "exit_code": 1,
        "error": {"type": "BudgetExceededError", "message": "BudgetExceededError: token budget: 12 > 10"},
    }
    assert failure_body("fork", 2, ["error: --at-step must be 0..3"])["error"] == {
        "type": None,
        "message": "--at-step must be 0..3",
    }
    assert failure_body("run", 1, [])["error"]["message"] == "exit status 1"
    assert command_of(["--config", "x.toml", "tools", "list", "--json"]) == "tools list"
    assert command_of(["fork", "run-1", "--at-step", "0", "--json"]) == "fork"
