"""Quotas from the client side: the accounts a worker keeps running, a run's plan, an operator's reads and raises.

- ``ensure_accounts``: at worker start, one ``QuotaAccount`` workflow per
  configured quota and per tenant with a budget, started if absent. An account
  that runs already keeps its live limits (an operator may have raised one):
  the file seeds an account, ``set_limits`` changes it.
- ``quota_plan``: what a run's input carries, resolved from the same config,
  so the workflow knows without any command which accounts its calls use.
- ``read_account`` / ``set_limits``: ``agentsteps quota`` and ``agentsteps budget``.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError

from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import QuotaConfigError
from ..contracts.names import QUOTA_ACCOUNT_WORKFLOW, QUOTA_SET_UPDATE, QUOTA_VIEW_QUERY
from ..contracts.quotas.config import QuotaSettings, tenant_problem
from ..contracts.quotas.ledger import AccountInput, LedgerState
from ..contracts.quotas.wire import AccountKind, AccountView, LimitChange, QuotaPlan, QuotaRoute, account_id
from ..failures.unwrap import typed_failures


def account_inputs(quotas: QuotaSettings) -> dict[str, AccountInput]:
    """Workflow id -> the input that starts its account."""
    out = {account_id("quota", q.name): AccountInput(ledger=LedgerState(quota=q)) for q in quotas.limits}
    for tenant in quotas.tenants:
        if tenant.has_budget:
            out[account_id("tenant", tenant.name)] = AccountInput(ledger=LedgerState(tenant=tenant))
    return out


async def ensure_accounts(client: Client, quotas: QuotaSettings, task_queue: str) -> list[str]:
    """Start every configured account that is not running; returns their workflow ids."""
    started = []
    for workflow_id, inp in account_inputs(quotas).items():
        await client.start_workflow(
            QUOTA_ACCOUNT_WORKFLOW,
            inp,
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        started.append(workflow_id)
    return started


def quota_plan(settings: WorkerSettings | QuotaSettings, tenant: str | None = None) -> QuotaPlan | None:
    """The plan a run started with ``tenant`` carries; None when nothing is configured (no command)."""
    quotas = settings.quotas if isinstance(settings, WorkerSettings) else settings
    problem = tenant_problem(tenant)
    if problem is not None:
        raise QuotaConfigError.with_message(problem)
    configured = quotas.tenant(tenant)
    if not quotas.limits and (configured is None or not configured.has_budget):
        return None
    prices: dict[str, tuple[float, float]] = {}
    if isinstance(settings, WorkerSettings):
        table = settings.prices
        for model in {*table.input_per_mtok, *table.output_per_mtok}:
            prices[model] = (table.input_per_mtok.get(model, 0.0), table.output_per_mtok.get(model, 0.0))
    routes = sorted(quotas.limits, key=lambda q: (q.model.endswith("*"), -len(q.model)))
    return QuotaPlan(
        tenant=tenant or "default",
        tenant_label=configured.name if configured is not None else "other",
        weight=configured.weight if configured is not None else 1.0,
        tenant_account=account_id("tenant", configured.name)
        if configured is not None and configured.has_budget
        else None,
        routes=[
            QuotaRoute(
                quota=q.name, provider=q.provider, model=q.model, api_key=q.api_key, account=account_id("quota", q.name)
            )
            for q in routes
        ],
        degrade_to=list(configured.degrade_to) if configured is not None else [],
        prices=prices,
    )


async def read_account(client: Client, kind: AccountKind, name: str) -> AccountView:
    try:
        view: AccountView = await client.get_workflow_handle(account_id(kind, name)).query(
            QUOTA_VIEW_QUERY, result_type=AccountView
        )
        return view
    except RPCError as exc:
        raise QuotaConfigError.with_message(f"no {kind} account named {name!r} is running: {exc.message}") from None


async def set_limits(client: Client, kind: AccountKind, name: str, change: LimitChange | dict[str, Any]) -> AccountView:
    """Raise (or lower) a live limit; runs waiting on the account see it at once.

    A change the account refuses (it would make the limits invalid) is ``QuotaConfigError``; nothing changed."""
    try:
        with typed_failures():
            view: AccountView = await client.get_workflow_handle(account_id(kind, name)).execute_update(
                QUOTA_SET_UPDATE, change, result_type=AccountView
            )
        return view
    except RPCError as exc:
        raise QuotaConfigError.with_message(f"no {kind} account named {name!r} is running: {exc.message}") from None


__all__ = ["account_inputs", "ensure_accounts", "quota_plan", "read_account", "set_limits"]
