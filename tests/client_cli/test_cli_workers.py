"""Who polls a task queue: a CLI never joins a cluster's queue unasked, never disagrees with the worker already
there, and ``agentsteps dev`` says what it found, refuses what it cannot use and never hangs.

Every command runs as a user runs it (a separate process); the "cluster" and the workers already polling are
real workers on the test's Temporal server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

from mcp_support import free_port
from pydantic import BaseModel
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from test_cli import AGENTSTEPS, ROOT, dev_port_env

from agentsteps.activities.tools import ToolRegistry
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.worker import running_worker


class Lookup(BaseModel):
    key: str


def _production_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool()
    def prod_lookup(args: Lookup) -> Lookup:
        """A tool only the production workers have."""
        return args

    return registry


@asynccontextmanager
async def _worker_on(client, tmp_path: Path, queue: str, identity: str, registry: ToolRegistry | None = None):
    settings = WorkerSettings(state_dir=tmp_path / f"w-{uuid.uuid4().hex[:6]}", task_queue=queue, tool_factories=[])
    async with running_worker(client, settings, registry=registry or _production_registry(), identity=identity):
        yield


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "AGENTSTEPS_CONFIG",
            "TEMPORAL_ADDRESS",
            "OPENAI_BASE_URL",
            "ANTHROPIC_BASE_URL",
        )
    }
    env.update(AGENTSTEPS_STATE_DIR=str(tmp_path / "cli-state"), AGENTSTEPS_METRICS_PORT=str(free_port()), **extra)
    return env


async def _agentsteps(*args: str, env: dict[str, str], timeout: float = 180) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        AGENTSTEPS, *args, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()


async def _poller_identities(client, queue: str) -> set[str]:
    """Every poller the server lists for the queue, gone or not (no freshness filter: nothing may hide)."""
    seen: set[str] = set()
    for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        answer = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind)
        )
        seen |= {p.identity for p in answer.pollers}
    return seen


async def test_a_cli_pointed_at_a_cluster_never_polls_its_queue_and_names_the_cause_of_a_failure(
    temporal_env, tmp_path
):
    client = temporal_env.client
    queue = f"prod-{uuid.uuid4().hex[:8]}"
    address = client.service_client.config.target_host
    async with _worker_on(client, tmp_path, queue, "1@prod-pod-a agentsteps-worker config=0123456789ab"):
        code, _, err = await _agentsteps(
            "run",
            "--spec",
            "examples/demo_agent.toml",
            "--input",
            "weather in Paris?",
            env=_clean_env(tmp_path, TEMPORAL_ADDRESS=address, AGENTSTEPS_TASK_QUEUE=queue),
        )
        identities = await _poller_identities(client, queue)

    assert "served by the worker(s) already polling it: 1@prod-pod-a" in err
    assert not any("agentsteps-run" in i for i in identities), identities
    # The production worker has no demo tools: the run fails there, and the last line says why.
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("run failed: InvalidSpecError: ") and "get_weather" in last, err
    assert "Traceback" not in err


async def test_a_worker_asked_for_against_a_cluster_passes_the_worker_checks_first(temporal_env, tmp_path):
    client = temporal_env.client
    queue = f"prod-{uuid.uuid4().hex[:8]}"
    code, _, err = await _agentsteps(
        "run",
        "--worker",
        "--spec",
        "examples/demo_agent.toml",
        "--input",
        "weather in Paris?",
        env=_clean_env(
            tmp_path, TEMPORAL_ADDRESS=client.service_client.config.target_host, AGENTSTEPS_TASK_QUEUE=queue
        ),
    )

    assert code == 1
    assert "error: DeploymentConfigError: " in err and "AGENTSTEPS_SINGLE_WORKER=1" in err
    assert await _poller_identities(client, queue) == set()


async def test_an_asked_for_worker_that_disagrees_with_the_one_on_the_queue_is_refused(temporal_env, tmp_path):
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with _worker_on(temporal_env.client, tmp_path, queue, "1@other agentsteps-dev config=deadbeef0000"):
        code, _, err = await _agentsteps(
            "run",
            "--worker",
            "--spec",
            "examples/demo_agent.toml",
            "--input",
            "weather in Paris?",
            env=_clean_env(tmp_path, AGENTSTEPS_TASK_QUEUE=queue, **dev_port_env(temporal_env)),
        )

    assert code == 1
    assert "error: StackConflictError: another worker already polls task queue" in err
    assert "config=deadbeef0000" in err


async def test_a_failed_model_call_is_one_line_per_attempt_and_the_run_ends_naming_its_cause(temporal_env, tmp_path):
    script = {"api_key": "sk-right", "default": {"content": "never"}}
    with ScriptedModelServer(script) as model:
        env = _clean_env(
            tmp_path,
            AGENTSTEPS_TASK_QUEUE=f"q-{uuid.uuid4().hex[:8]}",
            OPENAI_API_KEY="sk-wrong",
            OPENAI_BASE_URL=model.url_openai,
            **dev_port_env(temporal_env),
        )
        code, _, err = await _agentsteps("run", "--spec", "examples/demo_agent.toml", "--input", "weather?", env=env)
        _, _, debug = await _agentsteps(
            "--debug", "run", "--spec", "examples/demo_agent.toml", "--input", "weather?", env=env
        )

    assert code == 1
    failed = [
        line for line in err.splitlines() if line.startswith("WARNING call failed: llm.call") and " of agent-" in line
    ]
    assert len(failed) == 1 and "NonRetryableProviderError" in failed[0], err
    assert err.strip().splitlines()[-1].startswith("run failed: NonRetryableProviderError: ")
    assert "Traceback" not in err
    assert "Traceback (most recent call last)" in debug


async def test_dev_refuses_a_cluster_address(tmp_path):
    code, _, err = await _agentsteps("dev", env=_clean_env(tmp_path, TEMPORAL_ADDRESS="prod.example:7233"), timeout=60)

    assert code == 1
    assert "StackConflictError: agentsteps dev runs the embedded stack on this machine" in err
    assert "agentsteps worker" in err


async def test_dev_refuses_a_port_held_by_something_that_is_not_temporal_and_does_not_hang(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        started = time.monotonic()
        code, _, err = await _agentsteps(
            "dev", "--port", str(port), "--ui-port", str(free_port()), env=_clean_env(tmp_path), timeout=60
        )

    assert code == 1
    assert f"StackConflictError: port {port} is in use, but not by a Temporal server" in err
    assert "--port N" in err
    assert time.monotonic() - started < 45


async def test_dev_refuses_a_busy_console_port_on_one_line_before_it_starts_anything(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        code, _, err = await _agentsteps(
            "dev",
            "--port",
            str(free_port()),
            "--ui-port",
            str(free_port()),
            "--console-port",
            str(port),
            env=_clean_env(tmp_path),
            timeout=60,
        )

    assert code == 1
    assert err.strip().splitlines()[-1].startswith(f"error: StackConflictError: the console port {port} is in use")
    assert "Fatal Python error" not in err and "Temporal dev server started" not in err


async def test_dev_refuses_to_join_a_queue_another_worker_polls(temporal_env, tmp_path):
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with _worker_on(temporal_env.client, tmp_path, queue, "1@elsewhere agentsteps-dev config=aaaaaaaaaaaa"):
        code, _, err = await _agentsteps(
            "dev", env=_clean_env(tmp_path, AGENTSTEPS_TASK_QUEUE=queue, **dev_port_env(temporal_env)), timeout=60
        )

    assert code == 1
    assert "Temporal server found already running at" in err
    assert f"StackConflictError: a worker already polls task queue {queue!r}" in err


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


LOST_SECONDS = 3
"""How long dev goes on without an answer from its server (10 s by default): the same exit, sooner."""


def test_dev_exits_when_the_server_it_started_dies(tmp_path):
    port, ui = free_port(), free_port()
    dev = subprocess.Popen(
        [AGENTSTEPS, "dev", "--port", str(port), "--ui-port", str(ui)],
        env=_clean_env(tmp_path, AGENTSTEPS_SERVER_LOST_SECONDS=str(LOST_SECONDS)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        banner = dev.stdout.readline()
        assert f"Temporal server: 127.0.0.1:{port} (started by this command)" in banner, dev.stderr.read()
        servers = [c for c in _children(dev.pid) if "temporal" in Path(f"/proc/{c}/cmdline").read_text()]
        assert servers
        for child in servers:
            os.kill(child, signal.SIGKILL)
        code = dev.wait(timeout=60)
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
    err = dev.stderr.read()
    assert code == 3, err
    assert f"the Temporal server at 127.0.0.1:{port} has not answered for {LOST_SECONDS} s" in err


async def test_no_worker_on_a_server_the_command_started_itself_is_refused_instead_of_waiting_forever(tmp_path):
    code, _, err = await _agentsteps(
        "run",
        "--no-worker",
        "--spec",
        "examples/demo_agent.toml",
        "--input",
        "weather in Paris?",
        env=_clean_env(tmp_path, AGENTSTEPS_DEV_PORT=str(free_port()), AGENTSTEPS_DEV_UI_PORT=str(free_port())),
        timeout=120,
    )

    assert code == 1
    assert "StackConflictError: --no-worker, but nothing serves task queue 'agentsteps'" in err
