"""Builders for the quota tests: settings with a quota table, a run naming its tenant, history reading."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from agentsteps.client.quotas import AccountView, read_account
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.quotas.config import QuotaSettings


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def with_quotas(settings: WorkerSettings, **table: Any) -> WorkerSettings:
    return settings.model_copy(update={"quotas": QuotaSettings.model_validate(table)})


async def start_run(
    client: Client,
    settings: WorkerSettings,
    spec: AgentSpec,
    text: str = "hello",
    *,
    tenant: str | None = None,
    task_queue: str | None = None,
) -> WorkflowHandle[Any, AgentResult]:
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input=text, tenant=tenant),  # the worker's config decides the plan
        id=unique("quota-run"),
        task_queue=task_queue or settings.task_queue,
        result_type=AgentResult,
    )


async def event_types(handle: WorkflowHandle[Any, Any]) -> list[str]:
    history = await handle.fetch_history()
    return [EventType.Name(e.event_type) for e in history.events]


QUOTA_SCRIPT = {
    "replies": [{"fault": {"status": 429, "retry_after": "1", "message": "slow down"}}],
    "default": {"content": "ok", "delay_seconds": 0.2},
}
"""Slow enough that calls overlap, so a one-at-a-time quota makes the others wait; the first call meets one
provider 429 (retried), so the quota's throttled series exists."""


def quota_table() -> QuotaSettings:
    """A one-at-a-time quota on the test model and a tenant with a day budget, named apart per call
    (accounts are workflows that outlive a test and keep their live limits)."""
    from agent_support import MODEL

    return QuotaSettings.model_validate(
        {
            "limits": [
                {"name": unique("ops-quota"), "model": MODEL, "concurrent_requests": 1, "requests_per_minute": 10_000}
            ],
            "tenants": [{"name": unique("ops-tenant"), "budget": {"day": {"usd_hard": 1000.0}}}],
        }
    )


async def run_quota_burst(client: Client, settings: WorkerSettings, runs: int = 3) -> None:
    """``runs`` runs of the configured tenant at once, under the configured quota: one is granted, the others wait."""
    from agent_support import make_spec

    tenant = settings.quotas.tenants[0].name
    handles = [await start_run(client, settings, make_spec(tools=[]), tenant=tenant) for _ in range(runs)]
    for handle in handles:
        await handle.result()


async def settled_account(client: Client, kind: str, name: str, timeout: float = 30.0) -> AccountView:
    """The account once every release reached it (releases are signals the run does not wait for)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        view = await read_account(client, kind, name)
        if (view.concurrent == 0 and view.reserved_tokens == 0) or asyncio.get_running_loop().time() > deadline:
            return view
        await asyncio.sleep(0.1)
