"""A worker killed with SIGKILL mid-run: the run finishes elsewhere, no side effect repeats."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from agent_support import make_spec, model_call_events
from process_support import STICKY_AFTER_KILL, kill, start_worker_process, wait_for
from temporalio.client import WorkflowHandle

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.examples.demo_tools import NotificationLedger

WORKER = Path(__file__).parents[1] / "support" / "worker_process.py"


async def _killed_once(
    temporal_env, client, scripted, tmp_path, inp: AgentInput, when: Callable[[], bool]
) -> tuple[WorkflowHandle, AgentResult]:
    """A run started on a worker process that is SIGKILLed once ``when()`` holds; a second worker (same state
    directory) takes over. Returns the run's handle and result."""
    address = temporal_env.client.service_client.config.target_host
    task_queue = f"kill-{uuid.uuid4().hex[:8]}"
    state_dir = tmp_path / "state"
    first = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir, env=STICKY_AFTER_KILL)
    handle = await client.start_workflow(
        AGENT_WORKFLOW, inp, id=f"kill-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=AgentResult
    )
    try:
        await wait_for(when)
        kill(first)
        second = start_worker_process(WORKER, address, task_queue, scripted.url_openai, state_dir)
        try:
            return handle, await asyncio.wait_for(handle.result(), timeout=60)
        finally:
            kill(second)
    finally:
        kill(first)


async def test_sigkilled_worker_mid_tool_call_completes_on_a_new_worker_without_repeating_the_side_effect(
    temporal_env, client, scripted, tmp_path
):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "tool_calls": [
                            {
                                "name": "send_notification",
                                "arguments": {"recipient": "carol", "message": "build is red", "delay_seconds": 2},
                            }
                        ]
                    },
                },
                {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "carol knows"}},
            ]
        }
    )
    ledger_path = tmp_path / "state" / "notifications.db"
    spec = make_spec(tool_policy=ActivityPolicy(start_to_close_seconds=4, initial_interval_seconds=0.5))
    # Killed once the notification is delivered, and the activity has not reported back yet.
    _, result = await _killed_once(
        temporal_env,
        client,
        scripted,
        tmp_path,
        AgentInput(spec=spec, input="tell carol"),
        lambda: ledger_path.exists() and len(NotificationLedger(ledger_path).delivered()) == 1,
    )

    assert result.status == "completed"
    assert result.output == "carol knows"
    delivered = NotificationLedger(ledger_path).delivered()
    # One notification, reached twice: the retry found its idempotency key.
    assert [(recipient, attempts) for _, recipient, attempts in delivered] == [("carol", 2)]


async def test_sigkilled_worker_mid_carried_model_call_completes_on_a_new_worker_with_each_step_once(
    temporal_env, client, scripted, tmp_path
):
    """The model call a weather lookup carries (contracts/llm/next_call.py) is in flight when its worker dies: the
    lookup's activity times out and runs again on the next worker (a read-only tool: harmless), the carried
    call with it, and the run records each step once."""
    lookup = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    scripted.set_script(
        {
            "rules": [
                {"match": {"role": "user"}, "reply": lookup},
                {
                    "match": {"tool_result_for": "get_weather"},
                    "reply": {"content": "Paris is mild", "delay_seconds": 3},
                },
            ]
        }
    )
    # The carrying activity's timeout is the tool's plus the model call's: 9 s before the next worker retries it.
    spec = make_spec(
        tools=["get_weather"],
        tool_policy=ActivityPolicy(start_to_close_seconds=4, initial_interval_seconds=0.5),
        llm_policy=ActivityPolicy(start_to_close_seconds=5, initial_interval_seconds=0.5),
    )
    # Killed once the lookup answered and its carried call is held by the model.
    handle, result = await _killed_once(
        temporal_env,
        client,
        scripted,
        tmp_path,
        AgentInput(spec=spec, input="weather in Paris?"),
        lambda: len(scripted.requests) == 2,
    )

    assert result.status == "completed" and result.output == "Paris is mild"
    assert [s.kind for s in result.steps] == ["tool_call", "final"]
    # The first worker's carried call never reached the run: the second worker made it again, after the lookup.
    assert len(scripted.requests) == 3
    assert scripted.requests[2].body["messages"][-1]["role"] == "tool"
    history = await handle.fetch_history()
    assert model_call_events(history)[-1][0] == "tools.call"
