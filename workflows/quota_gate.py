"""A run's side of its quotas: learn them from the worker, reserve before a model call, wait durably, reconcile after.

The plan (which accounts, prices and degradation chain) is the worker's, and
the answer is in the run's history: a run under the newest release learns it
from its first model call (``llm.call.plan_first``: the worker sends nothing
when it has a plan, and answers with it), so a run on a worker without quotas
pays nothing for asking; a run recorded before it asked the ``quota.plan``
local activity at its start (``worker_plan``). A plan the caller put in the
input is ignored and logged (runs recorded before ``QUOTA_FROM_WORKER_PATCH``
replay the one they were sent). Only a run with a plan comes here; without one
a call issues exactly the commands it always did. With one, each call:

1. asks its tenant's account (if the tenant has a budget) for a reservation no
   provider's count of the call exceeds: the prompt's UTF-8 bytes (every
   byte-level BPE token stands for at least one byte) plus the chat format's
   overhead plus ``max_tokens``, priced from the price table.
   Refused: the run fails with ``BudgetExceededError`` naming tenant and period
   (a program's ``llm()`` is refused instead). Past a soft limit the call goes
   to the tenant's ``degrade_to`` model;
2. asks the quota covering its provider, model and key name, and waits for the grant:
   a signal back, so no worker slot is held, and the run's state says
   ``waiting_for_quota`` meanwhile;
3. after the call, signals each account the real use (or the estimate if
   the call failed: it may have been paid for), and tells the quota whether
   the provider answered 429 on the way (it lowers its effective limits).

Deterministic: the reservations are pure functions of the request (the quota's
is the o200k count, the tenant's the byte bound), the same on every worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from ..contracts import Degradation, LLMConfig, LLMRequest, LLMResponse, Violation, ViolationKind
    from ..contracts.errors import BudgetExceededError, DeploymentConfigError
    from ..contracts.llm.tokens import count_prompt_tokens, prompt_tokens_upper_bound
    from ..contracts.names import QUOTA_ACQUIRE_SIGNAL, QUOTA_GRANT_SIGNAL, QUOTA_PLAN_ACTIVITY, QUOTA_RELEASE_SIGNAL
    from ..contracts.persisted_ids import lease_request_id
    from ..contracts.quotas.plan import QuotaPlanAnswer, QuotaPlanInput
    from ..contracts.quotas.wire import LeaseGrant, LeaseRelease, LeaseRequest, QuotaPlan, QuotaRoute
    from ..failures import to_application_error
    from ..telemetry import workflow_metrics
    from .entries import signal_input
    from .releases.gates import plan_rides_first_call, quotas_from_worker


def warm_tokenizer() -> None:
    """Load the tokenizer outside any workflow task: its first load (a vocabulary file) can take longer than
    the SDK lets an activation run. Called where runs under a quota plan may be run or replayed."""
    from ..contracts.llm.tokens import encoding

    encoding()


class RunPlan:
    """A run's (or session run's) quota plan: decided at its start, or learned from its first model call.

    Rules: ``learn`` once, from a recorded answer; until then (``known`` false) one call at a time asks
    (``asking``) and the others wait for its answer, so no call is sent before the worker's plan is known."""

    def __init__(self, plan: QuotaPlan | None = None, *, tenant: str | None = None, known: bool = True) -> None:
        self.plan = plan
        self.tenant = tenant
        self.known = known
        self.asking = False

    @classmethod
    def from_first_call(cls, tenant: str | None) -> RunPlan:
        return cls(tenant=tenant, known=False)

    def learn(self, plan: QuotaPlan | None) -> None:
        self.plan, self.known = plan, True

    def carried(self, sent: QuotaPlan | None) -> QuotaPlan | None:
        """What a continue-as-new carries for a worker before ``QUOTA_FROM_WORKER_PATCH``: the worker's plan, or
        (none learned in this run) the one this run was carried, ``sent``."""
        return self.plan if self.known else sent


async def worker_plan(tenant: str | None, sent: QuotaPlan | None, *, from_caller: bool = True) -> RunPlan:
    """The run's plan from the worker's config, recorded: learned from its first model call under the newest
    release, else from ``quota.plan``; ``sent``, the input's, only for a run recorded before
    ``QUOTA_FROM_WORKER_PATCH``. Called once the tenant is checked, before the first model call.
    ``from_caller``: the input came from a caller (not the session's own continue-as-new, which carries the plan
    for a worker before this patch)."""
    # Clients before 0.3 send the plan they computed; honouring it would let a caller set its own budget.
    ignored = sent is not None and from_caller
    if plan_rides_first_call():
        if ignored:
            _ignored(tenant)
        return RunPlan.from_first_call(tenant)
    if not quotas_from_worker():
        return RunPlan(sent)
    if ignored:
        _ignored(tenant)
    answer: QuotaPlanAnswer = await workflow.execute_local_activity(
        QUOTA_PLAN_ACTIVITY,
        QuotaPlanInput(tenant=tenant),
        result_type=QuotaPlanAnswer,
        start_to_close_timeout=timedelta(seconds=30),
    )
    return RunPlan(answer.plan)


def _ignored(tenant: str | None) -> None:
    workflow.logger.warning(
        "ignored the quota plan in the input of tenant %r: the worker's config decides", tenant or "default"
    )


PENDING_TOOL_BYTES = 2_000
"""A tool the run names but has not described yet (its first call resolves the schemas on the worker) is
reserved as this many bytes of schema."""


def hard_budget_bound(request: LLMRequest) -> int:
    """Prompt tokens no provider counts more of: its UTF-8 bytes and the chat format's overhead
    (``prompt_tokens_upper_bound``), and each tool not yet described as ``PENDING_TOOL_BYTES``."""
    return prompt_tokens_upper_bound(request) + PENDING_TOOL_BYTES * len(request.tool_names or ())


class QuotaRefused(Exception):
    """The tenant's hard budget refused the call; ``details`` name the tenant and the period."""

    def __init__(self, message: str, details: dict[str, str]) -> None:
        super().__init__(message)
        self.details = details

    def failure(self) -> BaseException:
        return to_application_error(BudgetExceededError.with_message(str(self)), self.details)


class QuotaDesk:
    """The grants a workflow received (its ``quota_grant`` signal) and the calls waiting for one."""

    def __init__(self) -> None:
        self.grants: dict[str, LeaseGrant] = {}
        self._issued = 0
        self._releases: list[asyncio.Future[None]] = []

    def release(self, account: str, release: LeaseRelease) -> None:
        """Signal ``account`` the call's real use; not waited for here (``settle`` waits before the run ends)."""
        self._releases.append(
            asyncio.ensure_future(workflow.get_external_workflow_handle(account).signal(QUOTA_RELEASE_SIGNAL, release))
        )

    async def settle(self) -> None:
        """Before the workflow (or a session's turn) ends: a signal its run never saw initiated is dropped
        by the server once the run closes, so the releases still in flight are waited for."""
        pending, self._releases = self._releases, []
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def receive(self, grant: LeaseGrant) -> None:
        self.grants[grant.request_id] = grant

    def next_id(self) -> str:
        self._issued += 1
        # The run id alone: unique, and the same when the history is replayed under another workflow id.
        return lease_request_id(workflow.info().run_id, self._issued)

    async def ask(self, account: str, request: LeaseRequest) -> LeaseGrant:
        """Signal ``account`` and wait for its answer (durably: the run holds no worker slot)."""
        handle = workflow.get_external_workflow_handle(account)
        sent = asyncio.ensure_future(handle.signal(QUOTA_ACQUIRE_SIGNAL, request))
        rid = request.request_id
        await workflow.wait_condition(lambda: rid in self.grants or (sent.done() and _failed(sent)))
        if rid not in self.grants:
            raise to_application_error(
                DeploymentConfigError(
                    f"quota account {account!r} is not running: a worker with the [worker.quotas] config this "
                    "run's plan came from starts it"
                )
            )
        return self.grants.pop(rid)


def _failed(task: asyncio.Future[None]) -> bool:
    return task.cancelled() or task.exception() is not None


class QuotaHandlers:
    """The ``quota_grant`` signal, for every workflow whose runs make model calls under a plan."""

    quotas: QuotaDesk

    @workflow.signal(name=QUOTA_GRANT_SIGNAL)
    def quota_grant(self, raw: RawValue) -> None:
        grant = signal_input(raw, LeaseGrant, QUOTA_GRANT_SIGNAL)
        if grant is not None:
            self.quotas.receive(grant)


async def leased_call(
    desk: QuotaDesk,
    plan: QuotaPlan,
    request: LLMRequest,
    send: Callable[[LLMRequest], Awaitable[LLMResponse]],
    waiting: Callable[[int], None] = lambda change: None,
    degraded: Callable[[str, str], None] = lambda from_model, to: None,
) -> LLMResponse:
    """``send(request)`` under the plan's tenant budget and quota; raises ``QuotaRefused`` on a hard limit.

    ``degraded(from_model, to)`` is told when a soft limit moved the call to a cheaper model (the run lists
    it in ``AgentResult.degradations``: ``soft_budget_degradation``)."""
    # Pure and the same on every worker, but the tokenizer's first import reads its vocabulary file.
    with workflow.unsafe.sandbox_unrestricted(), workflow.unsafe.imports_passed_through():
        estimate_in = count_prompt_tokens(request)
    estimate_out = request.config.max_tokens
    tenant_lease: str | None = None
    if plan.tenant_account is not None:
        # A hard budget is a promise: reserve what no provider's count exceeds, reconcile to its count after.
        bound_in = hard_budget_bound(request)
        ask = LeaseRequest(
            request_id=desk.next_id(),
            requester=workflow.info().workflow_id,
            tenant=plan.tenant,
            weight=plan.weight,
            model=request.config.model,
            input_tokens=bound_in,
            output_tokens=estimate_out,
            usd=plan.estimate_usd(request.config.model, bound_in, estimate_out),
        )
        grant = await desk.ask(plan.tenant_account, ask)
        for ratio in grant.budget:
            workflow_metrics.record_budget_used(plan.tenant_label, ratio.period, ratio.limit, ratio.ratio)
        if not grant.granted:
            raise QuotaRefused(
                grant.refused or "tenant budget spent", {"tenant": plan.tenant, "period": grant.period or ""}
            )
        tenant_lease = ask.request_id
        if grant.degrade:
            before = request.config.model
            request = _degraded(plan, request)
            if request.config.model != before:
                degraded(before, request.config.model)
    route = plan.route(request.config.provider, request.config.model, request.config.api_key)
    quota_lease: str | None = None
    if route is not None:
        ask = LeaseRequest(
            request_id=desk.next_id(),
            requester=workflow.info().workflow_id,
            tenant=plan.tenant,
            weight=plan.weight,
            model=request.config.model,
            input_tokens=estimate_in,
            output_tokens=estimate_out,
        )
        started = workflow.now()
        waiting(1)
        try:
            grant = await desk.ask(route.account, ask)
        finally:
            waiting(-1)
        if not grant.granted:
            if tenant_lease is not None:
                desk.release(plan.tenant_account or "", LeaseRelease(request_id=tenant_lease))
            raise QuotaRefused(grant.refused or "quota refused the call", {"tenant": plan.tenant, "quota": route.quota})
        workflow_metrics.record_quota_grant(
            route.quota,
            (workflow.now() - started).total_seconds(),
            grant.queued,
            grant.utilization,
            estimate_in + estimate_out,
        )
        quota_lease = ask.request_id
    response: LLMResponse | None = None
    dropped = False
    try:
        response = await send(request)
        return response
    except GeneratorExit:
        # A dropped instance closed by the garbage collector: a release signal sent now would land in whichever
        # run's activation is current. The run, replayed, releases its own
        # (tests/workflows/test_session_dropped_instance.py).
        dropped = True
        raise
    finally:
        if not dropped:
            _release(desk, plan, route, request, response, (estimate_in, estimate_out), quota_lease, tenant_lease)


def _release(
    desk: QuotaDesk,
    plan: QuotaPlan,
    route: QuotaRoute | None,
    request: LLMRequest,
    response: LLMResponse | None,
    estimate: tuple[int, int],
    quota_lease: str | None,
    tenant_lease: str | None,
) -> None:
    """Both leases back to their accounts with what the call used (its estimate when it never answered)."""
    if response is not None:
        used_in, used_out = response.usage.prompt_tokens, response.usage.completion_tokens
        usd = response.cost_usd
    else:
        used_in, used_out = estimate
        usd = plan.estimate_usd(request.config.model, used_in, used_out)
    if quota_lease is not None and route is not None:
        throttled = response is not None and response.throttled > 0
        desk.release(
            route.account,
            LeaseRelease(
                request_id=quota_lease,
                input_tokens=used_in,
                output_tokens=used_out,
                throttled=throttled,
            ),
        )
        workflow_metrics.record_quota_actual(route.quota, used_in + used_out)
        if throttled and response is not None:
            workflow_metrics.record_quota_throttled(route.quota, response.throttled)
    if tenant_lease is not None and plan.tenant_account is not None:
        desk.release(
            plan.tenant_account,
            LeaseRelease(
                request_id=tenant_lease,
                input_tokens=used_in,
                output_tokens=used_out,
                usd=usd,
            ),
        )
    workflow_metrics.record_tenant_spend(plan.tenant_label, usd)


def soft_budget_degradation(step: int, tenant: str | None, from_model: str, to: str) -> Degradation:
    """What a run's result lists for a call its tenant's soft budget moved to ``to``."""
    reason = Violation(
        contract="tenant_budget",
        phase="pre",
        kind=ViolationKind.token_budget,
        path="$.tenant",
        message=f"tenant {tenant!r} is past a soft budget limit: the call went to {to} instead of {from_model}",
    )
    return Degradation(step=step, from_model=from_model, to=to, reason=reason)


def _degraded(plan: QuotaPlan, request: LLMRequest) -> LLMRequest:
    """The request on the tenant's first ``degrade_to`` model that is not the one it had."""
    for target in plan.degrade_to:
        if target.model != request.config.model:
            workflow_metrics.record_degradation("budget_soft", "fallback")
            update = {"provider": target.provider, "model": target.model}
            if target.api_key is not None:
                update["api_key"] = target.api_key
            config: LLMConfig = request.config.model_copy(update=update)
            return request.model_copy(update={"config": config})
    return request


__all__ = [
    "PENDING_TOOL_BYTES",
    "QuotaDesk",
    "QuotaHandlers",
    "QuotaRefused",
    "RunPlan",
    "hard_budget_bound",
    "leased_call",
    "soft_budget_degradation",
    "warm_tokenizer",
    "worker_plan",
]
