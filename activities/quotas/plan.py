"""``quota.plan``: a run's quotas, budget, prices and degradation chain, from the config of the worker.

Run as a local activity at the start of a run (or session run) recorded before
``RELEASE_2026_12_06_PATCH``; since, ``llm.call.plan_first`` asks ``plan_of`` on the
run's first model call. Either way the answer is recorded in its history: the
run keeps the accounts it started with when it is replayed elsewhere, and
nothing the caller sent decides them
(``contracts/quotas/plan.py``). Reads only the settings the worker was built
with: no network, no file.
"""

from __future__ import annotations

from functools import lru_cache

from temporalio import activity

from ...contracts.config.settings import WorkerSettings
from ...contracts.errors import QuotaConfigError
from ...contracts.names import QUOTA_PLAN_ACTIVITY
from ...contracts.quotas.config import tenant_problem
from ...contracts.quotas.plan import QuotaPlanAnswer, QuotaPlanInput, plan_for
from ...contracts.quotas.wire import QuotaPlan
from ...failures import to_application_error


class QuotaPlanActivities:
    def __init__(self, settings: WorkerSettings) -> None:
        quotas, prices = settings.quotas, settings.prices.per_model()

        # Many runs, few tenants: one plan per tenant, built once.
        @lru_cache(maxsize=1024)
        def plan(tenant: str | None) -> QuotaPlan | None:
            return plan_for(quotas, prices, tenant)

        self._plan = plan

    def plan_of(self, tenant: str | None) -> QuotaPlan | None:
        """The plan of a run billed to ``tenant`` (None: the worker has no quota and no budget for it); a bad
        tenant is refused typed. Also what ``llm.call.plan_first`` asks before it sends anything."""
        problem = tenant_problem(tenant)
        if problem is not None:  # the workflow checked it first; a raw call to the activity is refused too
            raise to_application_error(QuotaConfigError.with_message(problem))
        return self._plan(tenant)

    @activity.defn(name=QUOTA_PLAN_ACTIVITY)
    async def plan(self, inp: QuotaPlanInput) -> QuotaPlanAnswer:
        return QuotaPlanAnswer(plan=self.plan_of(inp.tenant))


__all__ = ["QuotaPlanActivities"]
