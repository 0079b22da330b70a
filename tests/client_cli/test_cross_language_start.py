"""A backend in any language starts a run by name with plain JSON (here: the temporal CLI)."""

from __future__ import annotations

import json
import subprocess
import uuid

from agent_support import MODEL
from temporalio.client import WorkflowHandle

from agentsteps.client.dev_server import temporal_binary
from agentsteps.contracts import AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW


async def test_temporal_cli_starts_agent_workflow_with_json_input(engine, scripted, temporal_env):
    scripted.set_script({"default": {"content": "hello from a JSON start"}})
    workflow_id = f"cli-{uuid.uuid4().hex[:8]}"
    payload = {"spec": {"model": {"model": MODEL, "max_tokens": 64, "context_window": 8000}}, "input": "hi"}
    subprocess.run(
        [
            temporal_binary(),
            "workflow",
            "start",
            "--address",
            temporal_env.client.service_client.config.target_host,
            "--type",
            AGENT_WORKFLOW,
            "--task-queue",
            engine.task_queue,
            "--workflow-id",
            workflow_id,
            "--input",
            json.dumps(payload),
        ],
        check=True,
        capture_output=True,
    )
    handle: WorkflowHandle = engine.client.get_workflow_handle(workflow_id, result_type=AgentResult)
    result = await handle.result()

    assert result.status == "completed"
    assert result.output == "hello from a JSON start"
