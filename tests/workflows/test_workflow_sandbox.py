"""The engine's workflow modules pass through Temporal's sandbox (imported once per process, not
once per run); a workflow from anywhere else still runs fully sandboxed."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from agent_support import make_spec
from sandbox_probe_workflow import SandboxProbe

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker

ENGINE_ROOT = Path(__file__).resolve().parents[2]
_executed: list[str] | None = None


def _record_module_code(event: str, args: tuple) -> None:
    # Audit hooks cannot be removed: this one records only while a test holds the list.
    if _executed is not None and event == "exec":
        _executed.append(getattr(args[0], "co_filename", ""))


sys.addaudithook(_record_module_code)


async def test_engine_workflow_modules_run_once_per_process_while_other_workflows_are_reimported(
    client, settings, scripted
):
    global _executed
    scripted.set_script({"rules": [], "default": {"content": "done"}})
    async with running_worker(client, settings, extra_workflows=[SandboxProbe]) as worker:
        _executed = []
        try:
            for _ in range(2):
                result = await client.execute_workflow(
                    AGENT_WORKFLOW,
                    AgentInput(spec=make_spec(), input="hi"),
                    id=f"sbx-{uuid.uuid4().hex[:10]}",
                    task_queue=worker.task_queue,
                    result_type=AgentResult,
                )
                assert result.status == "completed"
                await client.execute_workflow(
                    SandboxProbe.run, id=f"sbx-probe-{uuid.uuid4().hex[:10]}", task_queue=worker.task_queue
                )
            executed = _executed
        finally:
            _executed = None
    # The control: the hook does see the sandbox run a module's code, once per run of its workflow.
    assert sum(f.endswith("sandbox_probe_workflow.py") for f in executed) == 2
    assert [f for f in executed if _engine_source(f)] == []


def _engine_source(filename: str) -> bool:
    path = Path(filename)
    return path.is_relative_to(ENGINE_ROOT) and path.relative_to(ENGINE_ROOT).parts[0] not in (".venv", "tests")


async def test_a_workflow_outside_the_engine_still_may_not_read_the_wall_clock(client, settings):
    async with running_worker(client, settings, extra_workflows=[SandboxProbe]) as worker:
        answer = await client.execute_workflow(
            SandboxProbe.run, id=f"sbx-clock-{uuid.uuid4().hex[:10]}", task_queue=worker.task_queue
        )
    assert answer == "RestrictedWorkflowAccessError"
