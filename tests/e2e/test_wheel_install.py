"""The built wheel works on its own: installed (not editable) into a fresh venv outside the repository.

``python -m build`` makes the sdist and then the wheel from that sdist, so a
file missing from either fails here. Every command then runs from the venv's
own files: cwd outside the repository, no PYTHONPATH, and the imported
``agentsteps`` is asserted to live inside the venv. A subpackage left out of the
wheel, a data file not shipped, or a console script that points at nothing
fails one of these tests.

Slow (a build and an install, two to three minutes): not marked ``fast``, so
``make test-fast`` skips it; ``make test`` and CI run it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]

# The embedded server on free ports: a server another process runs on 7233 is never reused.
_ON_FREE_PORTS = """
import sys
import agentsteps.client.dev_server as dev_server
dev_server.DEV_SERVER_PORT, dev_server.UI_PORT = int(sys.argv[1]), int(sys.argv[2])
from agentsteps.cli import main
main(sys.argv[3:])
"""


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    sdist: Path
    work: Path  # the cwd of every command: outside the repository

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k
            not in {
                "PYTHONPATH",
                "VIRTUAL_ENV",
                "PYTHONHOME",
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "AGENTSTEPS_CONFIG",
                "TEMPORAL_ADDRESS",
                "OPENAI_BASE_URL",
                "ANTHROPIC_BASE_URL",
            }
        }
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["AGENTSTEPS_STATE_DIR"] = str(self.work / f"state-{uuid.uuid4().hex[:8]}")
        env["AGENTSTEPS_TASK_QUEUE"] = f"wheel-{uuid.uuid4().hex[:8]}"
        env.update(extra)
        return env

    def run(self, args: list[str], timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=self.work, env=self.env(**extra), capture_output=True, text=True, timeout=timeout
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _checked(args: list[str], **kwargs) -> None:
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.resolve().is_relative_to(ROOT)
    dist = base / "dist"
    _checked([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], timeout=540)
    (wheel,) = dist.glob("agentsteps-*.whl")
    (sdist,) = dist.glob("agentsteps-*.tar.gz")
    venv = base / "venv"
    # No pip of its own (seconds of ensurepip): this interpreter's pip installs into it (`--python`).
    _checked([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    # Dependencies come from the package index (pip's cache), at the tested set; agentsteps only from the wheel.
    # No bytecode compiled up front: a command compiles what it imports, and most of the SDKs it never imports.
    _checked(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-compile",
            "--disable-pip-version-check",
            "-c",
            str(ROOT / "constraints.txt"),
            str(wheel),
        ],
        timeout=540,
        cwd=base,
    )
    work = base / "work"
    work.mkdir()
    return Installed(venv=venv, wheel=wheel, sdist=sdist, work=work)


def test_the_installed_package_is_imported_from_the_venv_not_the_repository(installed):
    done = installed.run(
        [
            str(installed.bin / "python"),
            "-c",
            "import agentsteps, agentsteps.worker, agentsteps.examples.tickets; print(agentsteps.__file__)",
        ]
    )

    assert done.returncode == 0, done.stderr
    location = Path(done.stdout.strip()).resolve()
    assert location.is_relative_to(installed.venv.resolve()), location
    assert not location.is_relative_to(ROOT)


def test_version_is_the_wheel_metadata_version(installed):
    wheel_version = installed.wheel.name.split("-")[1]
    done = installed.run([str(installed.bin / "agentsteps"), "--version"])

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"agentsteps {wheel_version}"


def test_wheel_ships_the_type_marker_and_data_files_and_no_tests(installed):
    names = zipfile.ZipFile(installed.wheel).namelist()

    assert "agentsteps/py.typed" in names
    assert "agentsteps/scripted_model/scripts/weather.json" in names
    assert "agentsteps/examples/demo_agent.toml" in names
    assert not [n for n in names if n.startswith(("agentsteps/tests/", "agentsteps/bench/", "agentsteps/deploy/"))]
    # Every Python package in the source tree that the runtime imports made it into the wheel.
    shipped = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    in_tree = {
        "agentsteps/" + str(p.parent.relative_to(ROOT)).replace(os.sep, "/")
        for p in ROOT.rglob("__init__.py")
        if p.parent != ROOT and not p.relative_to(ROOT).parts[0].startswith((".", "tests", "bench", "build"))
    }
    assert in_tree <= shipped, sorted(in_tree - shipped)


def test_sdist_carries_the_changelog_and_the_reference(installed):
    import tarfile

    with tarfile.open(installed.sdist) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"CHANGELOG.md", "README.md", "pyproject.toml", "docs/compatibility.md", "docs/api.md", "py.typed"} <= names
    assert {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "cli-json").glob("*.json")} <= names


def test_worker_help_runs_from_the_installed_console_script(installed):
    done = installed.run([str(installed.bin / "agentsteps"), "worker", "--help"])

    assert done.returncode == 0, done.stderr
    assert "usage: agentsteps worker" in done.stdout


def test_demo_runs_from_the_installed_files_on_its_own_embedded_server(installed):
    done = installed.run(
        [str(installed.bin / "python"), "-c", _ON_FREE_PORTS, str(_free_port()), str(_free_port()), "demo"], timeout=420
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "status: completed" in done.stdout


def _serve_scripted_model(installed: Installed, script: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    proc = subprocess.Popen(
        [str(installed.bin / "agentsteps"), "scripted-model", "--script", str(script), "--port", str(port)],
        cwd=installed.work,
        env=installed.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc, port
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the installed scripted model did not come up")


def test_a_run_uses_the_installed_scripted_model_and_tickets_mcp_server(installed, temporal_env):
    work = installed.work
    db = work / "tickets.db"
    seeded = installed.run(
        [
            str(installed.bin / "python"),
            "-m",
            "agentsteps.examples.tickets",
            "--db",
            str(db),
            "--seed-issues",
            "12",
            "--seed-only",
        ]
    )
    assert seeded.returncode == 0, seeded.stderr
    token = uuid.uuid4().hex
    config = work / "agentsteps.toml"
    config.write_text(
        "[mcp.servers.tracker]\n"
        'transport = "stdio"\n'
        f"command = {json.dumps(str(installed.bin / 'python'))}\n"
        f'args = ["-m", "agentsteps.examples.tickets", "--transport", "stdio", "--db", {json.dumps(str(db))}]\n'
        'env = { TICKETS_API_TOKEN = "secret:TRACKER_TOKEN", TICKETS_EXPECTED_TOKEN = "secret:TRACKER_TOKEN" }\n'
    )
    spec = work / "triage.toml"
    spec.write_text(
        'name = "triage"\nsystem_prompt = "List the open tickets, then say how many."\n'
        'tools = ["list_issues"]\nmax_steps = 4\n'
        '[model]\nprovider = "openai"\nmodel = "scripted-2026-01-01"\n'
    )
    script = work / "script.json"
    script.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "match": {"role": "user"},
                        "reply": {"tool_calls": [{"name": "list_issues", "arguments": {"state": "open", "limit": 3}}]},
                    },
                    {"match": {"tool_result_for": "list_issues"}, "reply": {"content": "three open tickets listed"}},
                ]
            }
        )
    )
    model, port = _serve_scripted_model(installed, script)
    try:
        done = installed.run(
            [
                str(installed.bin / "agentsteps"),
                "--config",
                str(config),
                "run",
                "--spec",
                str(spec),
                "--input",
                "triage the open tickets",
                "--json",
            ],
            # The embedded stack on the test's server (TEMPORAL_ADDRESS would be a cluster, where run polls nothing).
            AGENTSTEPS_DEV_PORT=temporal_env.client.service_client.config.target_host.rsplit(":", 1)[1],
            OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
            OPENAI_API_KEY="sk-unused-by-the-scripted-model",
            TRACKER_TOKEN=token,
            AGENTSTEPS_METRICS_PORT=str(_free_port()),
        )
    finally:
        model.kill()
        model.wait()

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["output"] == "three open tickets listed"
    (call,) = result["steps"][0]["tool_calls"]
    assert call["name"] == "list_issues" and not call["is_error"]
    assert len(json.loads(call["content"])["issues"]) == 3  # answered by the installed tracker over MCP stdio


def test_a_users_type_checker_sees_the_installed_types(installed):
    consumer = installed.work / "consumer.py"
    consumer.write_text(
        "from agentsteps.client import start_agent_run\n"
        "from agentsteps.contracts import AgentSpec, LLMConfig\n"
        'spec = AgentSpec(model=LLMConfig(provider="openai", model="gpt-4o-mini-2024-07-18"))\n'
        "steps: str = spec.max_steps\n"  # the mistake a user's checker must catch
        "reveal_type(start_agent_run)\n"
    )
    # The repository's mypy, reading the venv's site-packages: only py.typed makes the wheel's types visible.
    done = installed.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--python-executable",
            str(installed.bin / "python"),
            "--cache-dir",
            str(installed.work / ".mypy_cache"),
            str(consumer),
        ]
    )

    assert "py.typed" not in done.stdout and "import-untyped" not in done.stdout, done.stdout
    assert 'expression has type "int", variable has type "str"' in done.stdout, done.stdout
    assert "AgentResult" in done.stdout  # start_agent_run's signature came through, return type included
    assert done.returncode == 1  # exactly the planted error
