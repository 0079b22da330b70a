"""Builders for the quota tests: settings with a quota table, a plan, history reading."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agentsteps.client.quotas import quota_plan
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.quotas.config import QuotaSettings


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def with_quotas(settings: WorkerSettings, **table: Any) -> WorkerSettings:
    return settings.model_copy(update={"quotas": QuotaSettings.model_validate(table)})


async def start_run(
    client: Client, settings: WorkerSettings, spec: AgentSpec, text: str = "hello", *, tenant: str | None = None,
    task_queue: str | None = None,
) -> WorkflowHandle[Any, AgentResult]:
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input=text, tenant=tenant, quota=quota_plan(settings, tenant)),
        id=unique("quota-run"),
        task_queue=task_queue or settings.task_queue,
        result_type=AgentResult,
    )


async def event_types(handle: WorkflowHandle[Any, Any]) -> list[str]:
    history = await handle.fetch_history()
    return [EventType.Name(e.event_type) for e in history.events]
