"""A stop always ends ``agentsteps worker``: a shutdown the SDK never finishes is cut at the deadline, a second
signal ends it at once, and a normal stop still exits 0 without an error line.

The worker is the real command in its own process, serving a real run whose
tool (``stubborn_tool_support``) is written badly: it swallows the
cancellation the SDK sends after the grace, so ``Worker.shutdown()`` never
returns. Nothing is mocked; the run is then finished by a second worker.
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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from agent_support import make_spec
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

from agentsteps.cli.hard_stop import EXIT_STOP_TIMED_OUT, STOP_MARGIN_SECONDS
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy

AGENTSTEPS = Path(sys.executable).with_name("agentsteps")
SUPPORT = Path(__file__).resolve().parents[1] / "support"
SCRIPT = {
    "rules": [
        {"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "slow_lookup", "arguments": {"key": "A-1"}}]}},
        {"match": {"tool_result_for": "slow_lookup"}, "reply": {"content": "A-1 is found."}},
    ]
}


@dataclass
class Worker:
    proc: subprocess.Popen
    stderr: Path

    def err(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def _start_worker(
    address: str,
    task_queue: str,
    base_url: str,
    tmp_path: Path,
    *,
    mode: str,
    grace_seconds: float,
    margin_seconds: float = STOP_MARGIN_SECONDS,
) -> Worker:
    name = f"{mode}-{uuid.uuid4().hex[:6]}"
    config = tmp_path / f"agentsteps-{name}.toml"
    config.write_text(
        '[worker]\ntool_factories = ["stubborn_tool_support:build_registry"]\n'
        f"stop_margin_seconds = {margin_seconds:g}\n"
    )
    port = _free_port()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "AGENTSTEPS_CONFIG": str(config),
        "AGENTSTEPS_TASK_QUEUE": task_queue,
        "AGENTSTEPS_STATE_DIR": str(tmp_path / "state"),
        "AGENTSTEPS_SINGLE_WORKER": "1",
        "AGENTSTEPS_METRICS_PORT": str(port),
        "AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": f"{grace_seconds:g}",
        "OPENAI_BASE_URL": base_url,
        "PYTHONPATH": str(SUPPORT),
        "STUBBORN_TOOL_MODE": mode,
        "STUBBORN_TOOL_LOG": str(tmp_path / "tool.log"),
    }
    stderr = tmp_path / f"worker-{name}.err"
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [str(AGENTSTEPS), "worker"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err
        )
    worker = Worker(proc, stderr)
    deadline = time.monotonic() + 120  # imports and connecting take long on a loaded machine
    while not _ready(port):
        assert proc.poll() is None, f"the worker exited ({proc.returncode}): {worker.err()[-2000:]}"
        assert time.monotonic() < deadline, f"the worker never became ready: {worker.err()[-2000:]}"
        time.sleep(0.2)
    return worker


async def _until(predicate, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def _exit_status(worker: Worker, timeout: float) -> tuple[int, float]:
    """The worker's exit status and when it exited (time.monotonic), waiting at most ``timeout``."""
    try:
        status = await asyncio.to_thread(worker.proc.wait, timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {timeout:g} s after the stop: {worker.err()[-2000:]}") from None
    return status, time.monotonic()


async def _start_run(client, task_queue: str) -> WorkflowHandle:
    spec = make_spec(
        tools=["slow_lookup"],
        # The abandoned attempt is retried once its start-to-close passes: no sooner than the stopping
        # worker stops polling (at once, on the SIGTERM the test sends as soon as the tool has started),
        # so the retry waits for the second worker.
        tool_policy=ActivityPolicy(start_to_close_seconds=8, max_attempts=5),
    )
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="look up A-1"),
        id=f"stop-deadline-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )


async def _end(handle: WorkflowHandle) -> None:
    if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
        await handle.terminate("test over")


def _tool_log(tmp_path: Path) -> list[str]:
    log = tmp_path / "tool.log"
    return log.read_text().splitlines() if log.exists() else []


@dataclass
class Stopped:
    """A worker stopped by SIGTERM while its run's tool call was running."""

    worker: Worker
    handle: WorkflowHandle
    status: int
    after_signal: float
    """Seconds from the SIGTERM to the exit."""
    address: str
    task_queue: str


@asynccontextmanager
async def _sigterm_during_the_tool_call(
    temporal_env, client, scripted, tmp_path: Path, *, mode: str, grace: float, margin: float = STOP_MARGIN_SECONDS
) -> AsyncIterator[Stopped]:
    """Starts a worker whose tool behaves as ``mode``, and a run; SIGTERMs the worker once the tool runs
    and waits for its exit. The worker and the run are cleaned up on leaving."""
    scripted.set_script(SCRIPT)
    address = temporal_env.client.service_client.config.target_host
    task_queue = f"{mode}-{uuid.uuid4().hex[:8]}"
    worker = _start_worker(
        address, task_queue, scripted.url_openai, tmp_path, mode=mode, grace_seconds=grace, margin_seconds=margin
    )
    handle = await _start_run(client, task_queue)
    try:
        await _until(lambda: f"start {mode}" in _tool_log(tmp_path), "the tool call", 60)
        sent_at = time.monotonic()
        worker.proc.send_signal(signal.SIGTERM)
        status, exited_at = await _exit_status(worker, timeout=grace + margin + 120)
        yield Stopped(worker, handle, status, exited_at - sent_at, address, task_queue)
    finally:
        worker.stop()
        await _end(handle)


@pytest.mark.timeout(600)
async def test_a_shutdown_stuck_on_a_tool_that_swallows_cancellation_ends_at_the_deadline_and_loses_nothing(
    temporal_env, client, scripted, tmp_path
):
    # A margin shorter than the default 20 s (the stop_margin_seconds setting): the shutdown is stuck for
    # good, so the deadline is reached whatever the margin; 5 s still leaves the SDK time to cancel the tool.
    grace, margin = 2.0, 5.0
    async with _sigterm_during_the_tool_call(
        temporal_env, client, scripted, tmp_path, mode="swallow", grace=grace, margin=margin
    ) as stopped:
        err = stopped.worker.err()
        # The SDK did cancel it after the grace, and the tool swallowed that: the shutdown was really stuck.
        assert "cancelled swallow" in _tool_log(tmp_path), err[-2000:]
        assert stopped.status == EXIT_STOP_TIMED_OUT, f"status {stopped.status}: {err[-2000:]}"
        assert stopped.after_signal >= grace + margin - 1, "ended before its deadline"
        assert "stopping: no new tasks" in err
        line = next(ln for ln in err.splitlines() if ln.startswith("error: still stopping"))
        assert "after SIGTERM" in line and f"graceful_shutdown_seconds {grace:g} + {margin:g} s margin" in line
        assert "Worker.shutdown()" in line and "running activities are abandoned" in line
        assert f"status {EXIT_STOP_TIMED_OUT}" in line
        assert "Traceback" not in err
        # Nothing lost: the run is still open, and a second worker finishes it through the tool's retry.
        assert (await stopped.handle.describe()).status == WorkflowExecutionStatus.RUNNING
        second = _start_worker(
            stopped.address, stopped.task_queue, scripted.url_openai, tmp_path, mode="quick", grace_seconds=grace
        )
        try:
            result = await asyncio.wait_for(stopped.handle.result(), timeout=180)
        finally:
            second.stop()

    assert result.status == "completed" and result.output == "A-1 is found."
    assert _tool_log(tmp_path).count("start quick") == 1


@pytest.mark.timeout(600)
async def test_a_second_signal_while_stopping_ends_the_worker_at_once(temporal_env, client, scripted, tmp_path):
    scripted.set_script(SCRIPT)
    address = temporal_env.client.service_client.config.target_host
    task_queue = f"twice-{uuid.uuid4().hex[:8]}"
    grace = 300.0  # the deadline is far away: only the second signal can end it within the test
    worker = _start_worker(address, task_queue, scripted.url_openai, tmp_path, mode="swallow", grace_seconds=grace)
    handle = await _start_run(client, task_queue)
    try:
        await _until(lambda: "start swallow" in _tool_log(tmp_path), "the tool call", 60)
        worker.proc.send_signal(signal.SIGTERM)
        await _until(lambda: "stopping: no new tasks" in worker.err(), "the stopping line", 60)
        assert worker.proc.poll() is None, "the first signal ended it"
        worker.proc.send_signal(signal.SIGINT)
        status, _ = await _exit_status(worker, timeout=60)  # far below grace + margin
    finally:
        worker.stop()
        await _end(handle)

    err = worker.err()
    assert status == 128 + signal.SIGINT, f"status {status}: {err[-2000:]}"
    line = next(ln for ln in err.splitlines() if ln.startswith("error: SIGINT again while stopping"))
    assert "exiting now (status 130)" in line and "running activities are abandoned" in line
    assert "still stopping" not in err and "Traceback" not in err


@pytest.mark.timeout(600)
async def test_a_stop_that_cancels_a_polite_tool_after_the_grace_still_exits_0_without_an_error_line(
    temporal_env, client, scripted, tmp_path
):
    grace = 2.0
    async with _sigterm_during_the_tool_call(
        temporal_env, client, scripted, tmp_path, mode="honour", grace=grace
    ) as stopped:
        err = stopped.worker.err()
        assert "cancelled honour" in _tool_log(tmp_path), "the stop never reached the cancellation after the grace"
        assert stopped.status == 0, f"status {stopped.status}: {err[-2000:]}"
        assert "stopping: no new tasks" in err
        assert not [ln for ln in err.splitlines() if ln.startswith("error:")], err[-2000:]
    # The figure behind STOP_MARGIN_SECONDS: what a healthy shutdown takes after the grace.
    print(
        f"after the {grace:g} s grace the shutdown took {stopped.after_signal - grace:.1f} s "
        f"(margin {STOP_MARGIN_SECONDS:g} s)"
    )


@pytest.mark.fast
def test_the_stop_margin_setting_defaults_to_the_margin_the_stop_deadline_uses_before_settings_load():
    assert WorkerSettings().stop_margin_seconds == STOP_MARGIN_SECONDS
