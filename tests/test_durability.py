"""A worker killed with SIGKILL mid-run: the run finishes elsewhere, no side effect repeats."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.examples.demo_tools import NotificationLedger

from agent_support import make_spec

WORKER = Path(__file__).with_name("worker_process.py")


def _start_worker(address: str, task_queue: str, base_url: str, state_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), address, task_queue, base_url, str(state_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


async def _wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.1)


async def test_sigkilled_worker_mid_tool_call_completes_on_a_new_worker_without_repeating_the_side_effect(
    temporal_env, client, scripted, tmp_path
):
    scripted.set_script(
        {
            "rules": [
                {"match": {"role": "user"}, "reply": {"tool_calls": [
                    {"name": "send_notification",
                     "arguments": {"recipient": "carol", "message": "build is red", "delay_seconds": 2}}
                ]}},
                {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "carol knows"}},
            ]
        }
    )
    address = temporal_env.client.service_client.config.target_host
    task_queue = f"kill-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    ledger_path = state_dir / "notifications.db"
    first = _start_worker(address, task_queue, scripted.url_openai, state_dir)
    spec = make_spec(tool_policy=ActivityPolicy(start_to_close_seconds=4, initial_interval_seconds=0.5))
    handle = await client.start_workflow(
        "AgentWorkflow",
        AgentInput(spec=spec, input="tell carol"),
        id=f"kill-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )
    try:
        # The notification is delivered, and the activity has not reported back yet.
        await _wait_for(lambda: ledger_path.exists() and len(NotificationLedger(ledger_path).delivered()) == 1)
        first.kill()
        first.wait()
        second = _start_worker(address, task_queue, scripted.url_openai, state_dir)
        try:
            result = await asyncio.wait_for(handle.result(), timeout=60)
        finally:
            second.kill()
            second.wait()
    finally:
        if first.poll() is None:
            first.kill()

    assert result.status == "completed"
    assert result.output == "carol knows"
    delivered = NotificationLedger(ledger_path).delivered()
    # One notification, reached twice: the retry found its idempotency key.
    assert [(recipient, attempts) for _, recipient, attempts in delivered] == [("carol", 2)]
