"""One account's bookkeeping: deterministic, no clock of its own (the workflow passes ``now``).

A quota account keeps a sliding one-minute window of what it granted (requests,
input and output tokens, each reservation replaced by the real use when the
run releases it, and counted from then on; a call still in flight stays counted
however long it takes to be sent: never leaving the window before the
provider's own), the open leases (concurrent requests) and a queue. A lease
not released by ``expires`` is taken back: a run whose worker was killed holds
nothing for longer than ``lease_seconds``.

Fairness: the waiting request granted next is the oldest one of the tenant
that has been served least for its weight (tokens granted / weight, its
"virtual time"). A tenant that starts waiting is brought up to the virtual
time of the last grant, so idle time is not banked as credit. If that request does not fit, nothing behind it is
granted either:
small requests from a busy tenant never starve a large one from a quiet tenant.

A tenant account grants at once or refuses: a call that would take a period's
``*_hard`` past its limit (spent + reserved by calls in flight + this call) is
refused, naming the period; past a ``*_soft`` limit it is granted and told to
degrade. A run reserves a bound no provider's count exceeds (``quota_gate``),
so spend stays within the hard limit however many calls are in flight; a
reservation its run never releases goes back after the tenant's
``lease_seconds``. Periods are UTC calendar days and months.

A provider's 429 (a release marked ``throttled``) lowers the quota's effective
per-minute limits: halved, never below ``MIN_FACTOR`` of the configured ones,
and halved again only by a call granted after the last cut (the calls already
in flight when the limit fell say nothing new). Each full window without a
429 gives back ``RECOVERY_STEP`` of the configured limits, up to them
(additive increase). A function of the ledger and ``now`` only: deterministic.
"""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from ..persisted_ids import period_key
from .config import PERIODS, QuotaLimit, TenantBudget
from .wire import AccountView, BudgetRatio, LeaseGrant, LeaseRelease, LeaseRequest, LimitChange, PeriodUse

WINDOW_SECONDS = 60.0
MIN_FACTOR = 0.125
"""The effective limits never fall below this share of the configured ones."""
RECOVERY_STEP = 0.125
"""The share of the configured limits given back per window without a 429."""


class WindowEntry(BaseModel):
    request_id: str
    at: float
    input_tokens: int
    output_tokens: int


class Lease(BaseModel):
    request: LeaseRequest
    expires: float


class LedgerState(BaseModel):
    """Everything an account carries over its continue-as-new."""

    quota: QuotaLimit | None = None
    tenant: TenantBudget | None = None
    window: list[WindowEntry] = Field(default_factory=list)
    leases: dict[str, Lease] = Field(default_factory=dict)
    queue: list[LeaseRequest] = Field(default_factory=list)
    virtual: dict[str, float] = Field(default_factory=dict)
    clock: float = 0.0
    """The virtual time of the last grant: a tenant that starts waiting starts no earlier."""
    spent: dict[str, PeriodUse] = Field(default_factory=dict)
    throttle_factor: float = 1.0
    """The share of the configured per-minute limits set at the last 429 (1: never throttled)."""
    throttled_at: float | None = None
    """When a 429 was last reported; recovery counts whole windows from here."""


class AccountInput(BaseModel):
    """A ``QuotaAccount`` workflow's input: its ledger (a new account's, or the one it continued with)."""

    ledger: LedgerState


class Ledger:
    def __init__(self, state: LedgerState) -> None:
        self.state = state

    @property
    def name(self) -> str:
        if self.state.quota is not None:
            return self.state.quota.name
        assert self.state.tenant is not None
        return self.state.tenant.name

    # ------------------------------------------------------------------ quota accounts

    @property
    def _window_seconds(self) -> float:
        return self.state.quota.window_seconds if self.state.quota is not None else WINDOW_SECONDS

    def _tidy(self, now: float) -> None:
        s = self.state
        for request_id in [k for k, lease in s.leases.items() if lease.expires <= now]:
            del s.leases[request_id]
        # A call still in flight stays counted however long it takes to reach the provider (a busy worker).
        s.window = [e for e in s.window if e.at > now - self._window_seconds or e.request_id in s.leases]

    def factor(self, now: float) -> float:
        """The share of the configured per-minute limits in force now (1 unless a 429 lowered it)."""
        s = self.state
        if s.throttled_at is None:
            return 1.0
        windows = int(max(0.0, now - s.throttled_at) // self._window_seconds)
        return min(1.0, s.throttle_factor + RECOVERY_STEP * windows)

    def effective(self, now: float) -> QuotaLimit | None:
        """The quota with its per-minute limits as in force now (concurrency and the rest as configured)."""
        q = self.state.quota
        if q is None:
            return None
        factor = self.factor(now)
        if factor >= 1.0:
            return q
        return q.model_copy(
            update={
                field: max(1, int(limit * factor))
                for field in ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute")
                if (limit := getattr(q, field)) is not None
            }
        )

    def _throttled(self, lease: Lease | None, now: float) -> None:
        """A 429: the effective limits are cut, once per round of calls granted under them."""
        s, q = self.state, self.state.quota
        assert q is not None
        granted = None if lease is None else lease.expires - q.lease_seconds
        current = self.factor(now)
        if s.throttled_at is None or (granted is not None and granted >= s.throttled_at):
            current = max(MIN_FACTOR, current / 2)
        s.throttle_factor, s.throttled_at = current, now

    def _used(self) -> tuple[int, int, int]:
        w = self.state.window
        return len(w), sum(e.input_tokens for e in w), sum(e.output_tokens for e in w)

    def _fits(self, request: LeaseRequest, now: float) -> bool:
        q = self.effective(now)
        assert q is not None
        requests, inputs, outputs = self._used()
        if requests == 0 and not self.state.leases:
            q = self.state.quota  # an idle account always lets one call through: a lowered limit never starves
            assert q is not None
        return not (
            (q.requests_per_minute is not None and requests + 1 > q.requests_per_minute)
            or (q.input_tokens_per_minute is not None and inputs + request.input_tokens > q.input_tokens_per_minute)
            or (q.output_tokens_per_minute is not None and outputs + request.output_tokens > q.output_tokens_per_minute)
            or (q.concurrent_requests is not None and len(self.state.leases) + 1 > q.concurrent_requests)
        )

    def utilization(self, now: float | None = None) -> float:
        """The binding per-minute limit's share in use (concurrency when no per-minute limit is set), against
        the effective limits at ``now`` (the configured ones without it)."""
        q = self.state.quota if now is None else self.effective(now)
        if q is None:
            return 0.0
        requests, inputs, outputs = self._used()
        shares = [
            used / limit
            for used, limit in (
                (requests, q.requests_per_minute),
                (inputs, q.input_tokens_per_minute),
                (outputs, q.output_tokens_per_minute),
            )
            if limit
        ]
        if not shares and q.concurrent_requests:
            shares = [len(self.state.leases) / q.concurrent_requests]
        return min(1.0, max(shares, default=0.0))

    def _too_large(self, request: LeaseRequest) -> str | None:
        q = self.state.quota
        assert q is not None
        for what, asked, limit in (
            ("input tokens", request.input_tokens, q.input_tokens_per_minute),
            ("output tokens", request.output_tokens, q.output_tokens_per_minute),
        ):
            if limit is not None and asked > limit:
                return f"the call asks for {asked} {what}, more than quota {q.name!r} allows in a minute ({limit})"
        return None

    def _grant(self, request: LeaseRequest, now: float, queued: bool) -> LeaseGrant:
        q = self.state.quota
        assert q is not None
        self.state.window.append(
            WindowEntry(
                request_id=request.request_id,
                at=now,
                input_tokens=request.input_tokens,
                output_tokens=request.output_tokens,
            )
        )
        self.state.leases[request.request_id] = Lease(request=request, expires=now + q.lease_seconds)
        served = self.state.virtual.get(request.tenant, 0.0)
        self.state.clock = max(self.state.clock, served)
        self.state.virtual[request.tenant] = (
            served + (request.input_tokens + request.output_tokens + 1) / request.weight
        )
        return LeaseGrant(
            request_id=request.request_id,
            requester=request.requester,
            account=q.name,
            queued=queued,
            utilization=self.utilization(now),
        )

    def offer(self, request: LeaseRequest, now: float) -> list[LeaseGrant]:
        """A run asks; the answers this makes ready (its own, perhaps granted at once)."""
        if self.state.tenant is not None:
            return [self._budget_answer(request, now)]
        if request.request_id in self.state.leases or any(r.request_id == request.request_id for r in self.state.queue):
            return []  # a repeated signal: the first one is being answered
        too_large = self._too_large(request)
        if too_large is not None:
            return [
                LeaseGrant(
                    request_id=request.request_id,
                    requester=request.requester,
                    account=self.name,
                    granted=False,
                    refused=too_large,
                )
            ]
        if all(r.tenant != request.tenant for r in self.state.queue):
            self.state.virtual[request.tenant] = max(self.state.virtual.get(request.tenant, 0.0), self.state.clock)
        self.state.queue.append(request)
        return self.dispatch(now, first=request.request_id)

    def dispatch(self, now: float, first: str | None = None) -> list[LeaseGrant]:
        """Grant what fits now, fairest first; ``first`` is the request just offered (not counted as queued)."""
        if self.state.quota is None:
            self._expire(now)  # a tenant's account wakes when a reservation runs out
            return []
        self._tidy(now)
        grants: list[LeaseGrant] = []
        while self.state.queue:
            tenants = {r.tenant for r in self.state.queue}
            tenant = min(tenants, key=lambda t: (self.state.virtual.get(t, 0.0), t))
            request = next(r for r in self.state.queue if r.tenant == tenant)
            if not self._fits(request, now):
                break
            self.state.queue.remove(request)
            grants.append(self._grant(request, now, queued=request.request_id != first))
        return grants

    def next_wakeup(self, now: float) -> float | None:
        """When waiting requests may fit again or a lease runs out; None when nothing will change by itself."""
        times = [lease.expires for lease in self.state.leases.values()]
        if self.state.queue:
            times += [e.at + self._window_seconds for e in self.state.window]
            if self.state.throttled_at is not None and self.factor(now) < 1.0:
                # The next step of recovery may let a waiting call through.
                elapsed = int((now - self.state.throttled_at) // self._window_seconds) + 1
                times.append(self.state.throttled_at + elapsed * self._window_seconds)
        later = [t for t in times if t > now]
        return min(later, default=None)

    # ------------------------------------------------------------------ tenant accounts

    def _period_use(self, period: str, now: float) -> PeriodUse:
        key = period_key(period, now)
        use = self.state.spent.get(period)
        if use is None or use.key != key:
            use = self.state.spent[period] = PeriodUse(key=key)
        return use

    def _reserved(self, now: float) -> tuple[int, float]:
        """What calls in flight hold; an expired reservation holds nothing even before it is swept (a query
        reads without changing the ledger)."""
        leases = [lease for lease in self.state.leases.values() if lease.expires > now]
        return (
            sum(lease.request.input_tokens + lease.request.output_tokens for lease in leases),
            sum(lease.request.usd for lease in leases),
        )

    def _expire(self, now: float) -> None:
        """Reservations whose run never released them (terminated, timed out, its worker gone) go back."""
        for request_id in [k for k, lease in self.state.leases.items() if lease.expires <= now]:
            del self.state.leases[request_id]

    def _budget_answer(self, request: LeaseRequest, now: float) -> LeaseGrant:
        tenant = self.state.tenant
        assert tenant is not None
        self._expire(now)
        if request.request_id in self.state.leases:
            return LeaseGrant(request_id=request.request_id, requester=request.requester, account=tenant.name)
        reserved_tokens, reserved_usd = self._reserved(now)
        tokens = request.input_tokens + request.output_tokens
        degrade = False
        for period in PERIODS:
            budget = tenant.budget.get(period)
            if budget is None:
                continue
            use = self._period_use(period, now)
            after_tokens = use.tokens + reserved_tokens + tokens
            after_usd = use.usd + reserved_usd + request.usd
            for unit, after, hard in (
                ("tokens", after_tokens, budget.tokens_hard),
                ("usd", after_usd, budget.usd_hard),
            ):
                if hard is not None and after > hard:
                    return LeaseGrant(
                        request_id=request.request_id,
                        requester=request.requester,
                        account=tenant.name,
                        granted=False,
                        period=period,
                        refused=(
                            f"tenant {tenant.name!r} {period} budget: {unit} {_num(after)} with this call > "
                            f"hard limit {_num(hard)}"
                        ),
                        budget=self.ratios(now),
                    )
            if (budget.tokens_soft is not None and after_tokens > budget.tokens_soft) or (
                budget.usd_soft is not None and after_usd > budget.usd_soft
            ):
                degrade = True
        # A run terminated or timed out never releases: its reservation goes back after the tenant's lease.
        self.state.leases[request.request_id] = Lease(request=request, expires=now + tenant.lease_seconds)
        return LeaseGrant(
            request_id=request.request_id,
            requester=request.requester,
            account=tenant.name,
            degrade=degrade,
            budget=self.ratios(now),
        )

    def ratios(self, now: float) -> list[BudgetRatio]:
        tenant = self.state.tenant
        if tenant is None:
            return []
        reserved_tokens, reserved_usd = self._reserved(now)
        out: list[BudgetRatio] = []
        for period, budget in tenant.budget.items():
            use = self._period_use(period, now)
            for limit in ("soft", "hard"):
                shares = [
                    (use.tokens + reserved_tokens) / cap for cap in [getattr(budget, f"tokens_{limit}")] if cap
                ] + [(use.usd + reserved_usd) / cap for cap in [getattr(budget, f"usd_{limit}")] if cap]
                if shares:
                    out.append(BudgetRatio(period=period, limit=limit, ratio=max(shares)))
        return out

    # ------------------------------------------------------------------ both

    def release(self, release: LeaseRelease, now: float) -> list[LeaseGrant]:
        """The run's call ended: its lease goes, its reservation becomes its real use."""
        lease = self.state.leases.pop(release.request_id, None)
        if self.state.tenant is not None:
            if lease is not None or release.input_tokens or release.output_tokens:
                for period in self.state.tenant.budget:
                    use = self._period_use(period, now)
                    use.tokens += release.input_tokens + release.output_tokens
                    use.usd += release.usd
            return []
        if release.throttled:
            self._throttled(lease, now)
        for entry in self.state.window:
            if entry.request_id == release.request_id:
                entry.input_tokens, entry.output_tokens = release.input_tokens, release.output_tokens
                # Counted from when the call ended: the provider counted it from some moment in between,
                # so it leaves this window no earlier than the provider's.
                entry.at = max(entry.at, now)
        return self.dispatch(now)

    def change(self, change: LimitChange) -> None:
        """An operator's ``set_limits``: validated again as a whole, so a change cannot make a bad config."""
        s = self.state
        if s.quota is not None:
            fields = {
                k: v
                for k, v in change.model_dump(
                    include={
                        "requests_per_minute",
                        "input_tokens_per_minute",
                        "output_tokens_per_minute",
                        "concurrent_requests",
                    }
                ).items()
                if v is not None
            }
            s.quota = QuotaLimit.model_validate({**s.quota.model_dump(), **fields})
        if s.tenant is not None:
            data = s.tenant.model_dump()
            if change.weight is not None:
                data["weight"] = change.weight
            if change.period is not None and change.budget is not None:
                # Merged: the fields given replace those limits, the period's other limits stay.
                data["budget"][change.period] = {
                    **data["budget"].get(change.period, {}),
                    **change.budget.model_dump(exclude_none=True),
                }
            s.tenant = TenantBudget.model_validate(data)

    def view(self, now: float) -> AccountView:
        self._tidy(now) if self.state.quota is not None else None
        requests, inputs, outputs = self._used()
        reserved_tokens, reserved_usd = self._reserved(now)
        for period in self.state.tenant.budget if self.state.tenant else {}:
            self._period_use(period, now)
        return AccountView(
            name=self.name,
            kind="quota" if self.state.quota is not None else "tenant",
            quota=self.state.quota,
            tenant=self.state.tenant,
            requests_in_window=requests,
            input_tokens_in_window=inputs,
            output_tokens_in_window=outputs,
            concurrent=len(self.state.leases) if self.state.quota is not None else 0,
            waiting=len(self.state.queue),
            utilization=self.utilization(now),
            effective=self.effective(now),
            effective_factor=self.factor(now) if self.state.quota is not None else 1.0,
            throttled_at=self.state.throttled_at,
            waiting_by_tenant=dict(sorted(Counter(r.tenant for r in self.state.queue).items())[:100]),
            served_per_weight={t: round(v, 1) for t, v in sorted(self.state.virtual.items())[:100]},
            spent=dict(self.state.spent),
            reserved_tokens=reserved_tokens if self.state.tenant else 0,
            reserved_usd=reserved_usd if self.state.tenant else 0.0,
        )


def _num(value: float) -> str:
    return f"{value:.6g}"


__all__ = [
    "AccountInput",
    "Lease",
    "Ledger",
    "LedgerState",
    "MIN_FACTOR",
    "RECOVERY_STEP",
    "WINDOW_SECONDS",
    "WindowEntry",
    "period_key",
]
