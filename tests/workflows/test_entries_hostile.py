"""Every workflow input, update and signal, sent in a wrong shape, is answered where it can be.

Hostile shapes are generated (hypothesis, and hypothesis-jsonschema for "valid JSON of the wrong shape":
an agent input whose spec has tools and no model), a few per entry so the file stays quick; each goes
through the real dev server and a real worker. A start fails at once with ``InvalidSpecError`` naming the
JSON path; an update is refused by its validator; a signal is dropped, and no workflow task ever fails.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from typing import Any

import pytest
from agent_support import make_spec
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from session_support import rejected, session_id
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agentsteps.client.dev_server import temporal_binary
from agentsteps.contracts import AgentInput
from agentsteps.contracts.composition.pipeline_run import PipelineInput
from agentsteps.contracts.monitor import MonitorInput
from agentsteps.contracts.names import (
    AGENT_WORKFLOW,
    APPROVE_UPDATE,
    CANCEL_SIGNAL,
    CLOSE_UPDATE,
    MONITOR_WORKFLOW,
    PIPELINE_WORKFLOW,
    QUEUE_JOIN_UPDATE,
    QUEUE_LEAVE_SIGNAL,
    QUEUE_REGISTRY_TASK_QUEUE,
    QUEUE_REGISTRY_WORKFLOW,
    QUOTA_ACCOUNT_WORKFLOW,
    QUOTA_ACQUIRE_SIGNAL,
    QUOTA_GRANT_SIGNAL,
    QUOTA_RELEASE_SIGNAL,
    QUOTA_SET_UPDATE,
    REJECT_UPDATE,
    REWIND_UPDATE,
    SESSION_WORKFLOW,
    STATE_QUERY,
    TURN_UPDATE,
)
from agentsteps.contracts.queue_registry import JoinRequest, LeaveRequest, RegistryState
from agentsteps.contracts.quotas.ledger import AccountInput
from agentsteps.contracts.quotas.wire import LeaseGrant, LeaseRelease, LeaseRequest, LimitChange
from agentsteps.contracts.session import CloseInput, RewindInput, SessionInput, TurnInput
from agentsteps.worker import serving_queue_registries

hypothesis_jsonschema = pytest.importorskip("hypothesis_jsonschema")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def examples(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    """``n`` values of ``strategy``, the same every run (derandomized), drawn before the server part."""
    out: list[Any] = []

    @hsettings(
        max_examples=n,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out[:n]


def wrong_shapes(*models: type[BaseModel], n: int = 3) -> list[Any]:
    """Arbitrary JSON that every one of ``models`` refuses."""

    def refused(value: Any) -> bool:
        for model in models:
            try:
                model.model_validate(value)
            except ValidationError:
                continue
            return False
        return True

    return [v for v in examples(JSON, n * 4) if refused(v)][:n]


def spec_without_model(n: int = 2) -> list[dict[str, Any]]:
    """Schema-shaped agent inputs whose spec lacks its model: valid JSON another language may well send."""
    schema = AgentInput.model_json_schema()
    spec = schema["$defs"]["AgentSpec"]
    spec["required"] = [r for r in spec.get("required", []) if r != "model"]
    spec["properties"] = {"tools": spec["properties"]["tools"], "name": spec["properties"]["name"]}
    spec["additionalProperties"] = False
    schema["properties"] = {"spec": schema["properties"]["spec"], "input": schema["properties"]["input"]}
    schema["required"] = ["spec", "input"]
    return examples(hypothesis_jsonschema.from_schema(schema), n)


async def no_task_failed(client: Client, workflow_id: str) -> None:
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        assert event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, event


async def fails_fast_typed(client: Client, task_queue: str, workflow: str, arg: Any) -> ApplicationError:
    workflow_id = f"hostile-{uuid.uuid4().hex[:10]}"
    handle = await client.start_workflow(workflow, arg, id=workflow_id, task_queue=task_queue)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=15)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidSpecError", cause
    assert cause.non_retryable and "$" in cause.message, cause.message
    await no_task_failed(client, workflow_id)
    return cause


MESSAGES = (TurnInput, RewindInput, CloseInput, LimitChange, LeaseGrant, LeaseRequest, LeaseRelease)
"""Every update and signal argument: a generated shape must be refused by all of them."""

STARTS = [
    (AGENT_WORKFLOW, AgentInput),
    (PIPELINE_WORKFLOW, PipelineInput),
    (MONITOR_WORKFLOW, MonitorInput),
    (QUOTA_ACCOUNT_WORKFLOW, AccountInput),
    (SESSION_WORKFLOW, SessionInput),
]


async def test_a_wrongly_shaped_start_of_every_workflow_type_fails_at_once_naming_the_json_path(engine):
    for workflow, model in STARTS:
        for arg in wrong_shapes(model, n=2):
            await fails_fast_typed(engine.client, engine.task_queue, workflow, arg)
    for arg in spec_without_model():
        cause = await fails_fast_typed(engine.client, engine.task_queue, AGENT_WORKFLOW, arg)
        assert "$.spec.model" in cause.message, cause.message


async def test_a_start_by_name_from_the_temporal_cli_with_a_spec_lacking_a_model_fails_fast(engine):
    workflow_id = f"raw-{uuid.uuid4().hex[:10]}"
    spec = {"spec": {"name": "x", "tools": ["get_weather"]}, "input": "weather please"}
    address = engine.client.service_client.config.target_host
    started = subprocess.run(
        [temporal_binary(), "workflow", "start", "--address", address, "--type", AGENT_WORKFLOW]
        + ["--task-queue", engine.task_queue, "--workflow-id", workflow_id, "--input", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert started.returncode == 0, started.stderr
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(engine.client.get_workflow_handle(workflow_id).result(), timeout=15)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidSpecError"
    assert "$.spec.model" in cause.message and cause.non_retryable
    await no_task_failed(engine.client, workflow_id)


async def test_wrongly_shaped_updates_are_refused_by_their_validators_and_signals_dropped(engine):
    client = engine.client
    sid = session_id()
    await client.start_workflow(
        SESSION_WORKFLOW,
        SessionInput(spec=make_spec(tools=["get_weather"])),
        id=sid,
        task_queue=engine.task_queue,
    )
    shapes = wrong_shapes(*MESSAGES, n=3) + [{"nope": 1}, [1, 2], None]
    for update in (TURN_UPDATE, REWIND_UPDATE, CLOSE_UPDATE, APPROVE_UPDATE, REJECT_UPDATE):
        for arg in shapes:
            refusal = await rejected(client, sid, update, arg)
            assert isinstance(refusal, ApplicationError) and refusal.type in (
                "InvalidSpecError",
                "InvalidTurnError",
                "ApprovalError",
            ), (update, arg, refusal)
    handle = client.get_workflow_handle(sid)
    for signal in (QUOTA_GRANT_SIGNAL, CANCEL_SIGNAL):
        for arg in shapes:
            await handle.signal(signal, arg)
    state = await handle.query(STATE_QUERY)
    assert state is not None  # still answering: every hostile signal was dropped
    await no_task_failed(client, sid)

    account = f"hostile-account-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(
        QUOTA_ACCOUNT_WORKFLOW, AccountInput.model_validate({"ledger": {}}), id=account, task_queue=engine.task_queue
    )
    account_handle = client.get_workflow_handle(account)
    for signal in (QUOTA_ACQUIRE_SIGNAL, QUOTA_RELEASE_SIGNAL):
        for arg in shapes:
            await account_handle.signal(signal, arg)
    for arg in shapes:
        refusal = await rejected(client, account, QUOTA_SET_UPDATE, arg)
        assert isinstance(refusal, ApplicationError) and refusal.type.endswith("Error"), refusal
    assert (await account_handle.describe()).status == WorkflowExecutionStatus.RUNNING
    await no_task_failed(client, account)
    for workflow_id in (sid, account):
        await client.get_workflow_handle(workflow_id).terminate("test over")


async def test_the_queue_registry_refuses_wrongly_shaped_starts_joins_and_leaves(client):
    async with serving_queue_registries(client):
        for arg in wrong_shapes(RegistryState, n=2):
            await fails_fast_typed(client, QUEUE_REGISTRY_TASK_QUEUE, QUEUE_REGISTRY_WORKFLOW, arg)
        registry = f"hostile-registry-{uuid.uuid4().hex[:8]}"
        await client.start_workflow(
            QUEUE_REGISTRY_WORKFLOW, RegistryState(), id=registry, task_queue=QUEUE_REGISTRY_TASK_QUEUE
        )
        for arg in wrong_shapes(JoinRequest, LeaveRequest, n=3):
            refusal = await rejected(client, registry, QUEUE_JOIN_UPDATE, arg)
            assert isinstance(refusal, ApplicationError) and refusal.type == "InvalidSpecError", refusal
            await client.get_workflow_handle(registry).signal(QUEUE_LEAVE_SIGNAL, arg)
        assert (await client.get_workflow_handle(registry).describe()).status == WorkflowExecutionStatus.RUNNING
        await no_task_failed(client, registry)
        await client.get_workflow_handle(registry).terminate("test over")
