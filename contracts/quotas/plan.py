"""Which accounts a run's model calls go through, derived from the worker's own config.

The worker decides (DESIGN.md rule 13): a start names only its tenant. The
run's first model call (``llm.call.plan_first``; before ``RELEASE_2026_12_06_PATCH``
the ``quota.plan`` local activity) answers with this plan, built from the
config of the worker that ran it, and Temporal records the answer in the run's
history, so a replay on a worker with another config takes the same accounts.
A plan a caller sends in the input (``AgentInput.quota``, from clients before
0.3) is ignored by every run that asks the worker.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, model_validator

from ..llm.request import LLMResponse
from ..persisted_ids import account_id
from .config import QuotaSettings
from .wire import QuotaPlan, QuotaRoute


class QuotaPlanInput(BaseModel):
    """The ``quota.plan`` activity's input: the tenant the run bills to (None: ``default``)."""

    tenant: str | None = None


class QuotaPlanAnswer(BaseModel):
    plan: QuotaPlan | None = None
    """None when the worker's config has no quota and no budget for the tenant: the run issues no quota command."""


class PlanFirstAnswer(BaseModel):
    """What ``llm.call.plan_first`` (a run's first model call, its plan unknown: ``LLMRequest.tenant``) answers.

    Exactly one of the two: the call made (the worker has no plan for the tenant), or the worker's plan
    and nothing sent (the run makes the call again under it, reserving first)."""

    response: LLMResponse | None = None
    plan: QuotaPlan | None = None

    @model_validator(mode="after")
    def _one_of_the_two(self) -> PlanFirstAnswer:
        if (self.response is None) == (self.plan is None):
            raise ValueError("a plan-first answer carries either the response or the plan")
        return self


def plan_for(quotas: QuotaSettings, prices: Mapping[str, tuple[float, float]], tenant: str | None) -> QuotaPlan | None:
    """The plan of a run billed to ``tenant`` (already checked by ``tenant_problem``) under ``quotas``.

    ``prices``: USD per million input and output tokens by model (the worker's price table)."""
    configured = quotas.tenant(tenant)
    if not quotas.limits and (configured is None or not configured.has_budget):
        return None
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
        prices=dict(prices),
    )


__all__ = ["PlanFirstAnswer", "QuotaPlanAnswer", "QuotaPlanInput", "plan_for"]
