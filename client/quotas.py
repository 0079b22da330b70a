"""Quotas from the client side: the accounts a worker keeps running, a run's plan, an operator's reads and raises.

- ``ensure_accounts``: at worker start, one ``QuotaAccount`` workflow per
  configured quota and per tenant with a budget, started if absent. An account
  that runs already keeps its live limits (an operator may have raised one):
  the file seeds an account, ``set_limits`` changes it.
- ``quota_plan``: the plan a worker with this config gives a run of a tenant
  (the worker's ``quota.plan`` activity decides; a caller never sends one).
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
from ..contracts.quotas.plan import plan_for
from ..contracts.quotas.wire import AccountKind, AccountView, LimitChange, QuotaPlan, account_id
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
    """The plan the ``quota.plan`` activity gives a run billed to ``tenant`` on a worker with ``settings``
    (what ``agentsteps quota plan`` and the tests show); None when nothing is configured (no command)."""
    quotas = settings.quotas if isinstance(settings, WorkerSettings) else settings
    problem = tenant_problem(tenant)
    if problem is not None:
        raise QuotaConfigError.with_message(problem)
    prices = settings.prices.per_model() if isinstance(settings, WorkerSettings) else {}
    return plan_for(quotas, prices, tenant)


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
