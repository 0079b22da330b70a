"""The account's bookkeeping, without Temporal: fair shares, the window, leases that expire, budgets."""

from __future__ import annotations

import pytest

from agentsteps.contracts.quotas.config import QuotaLimit, TenantBudget
from agentsteps.contracts.quotas.ledger import Ledger, LedgerState
from agentsteps.contracts.quotas.wire import LeaseRelease, LeaseRequest

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

T0 = 1_780_000_000.0  # a fixed moment (2026-05-28 UTC)


def quota(**limits) -> Ledger:
    return Ledger(LedgerState(quota=QuotaLimit(name="q", **limits)))


def ask(n: int, tenant: str, weight: float = 1.0, tokens: int = 100) -> LeaseRequest:
    return LeaseRequest(
        request_id=f"{tenant}-{n}",
        requester=f"run-{tenant}",
        tenant=tenant,
        weight=weight,
        input_tokens=tokens // 2,
        output_tokens=tokens - tokens // 2,
    )


def test_when_the_quota_is_scarce_tenants_are_served_in_proportion_to_their_weights():
    ledger = quota(concurrent_requests=1)
    ledger.offer(ask(0, "warmup"), T0)  # holds the only slot: everything after queues
    for n in range(300):  # a burst from "big", weight 1, queued before "small" (weight 3) arrives
        ledger.offer(ask(n, "big"), T0)
    for n in range(100):
        ledger.offer(ask(n, "small", weight=3), T0)
    served: list[str] = []
    holder = "warmup-0"
    for _ in range(120):  # while both still wait
        grants = ledger.release(LeaseRelease(request_id=holder, input_tokens=50, output_tokens=50), T0)
        assert len(grants) == 1
        holder = grants[0].request_id
        served.append(grants[0].request_id.split("-")[0])
    share_small = served.count("small") / len(served)
    assert share_small == pytest.approx(0.75, abs=0.02), "3:1 by weight, though the burst queued first"


def test_a_tenant_that_was_idle_banks_no_credit_against_the_tenants_already_waiting():
    ledger = quota(concurrent_requests=1)
    ledger.offer(ask(0, "a"), T0)
    for n in range(1, 50):
        ledger.offer(ask(n, "a"), T0)
    for n in range(1, 50):  # "a" alone is served for a while
        ledger.release(LeaseRelease(request_id=f"a-{n - 1}", input_tokens=50, output_tokens=50), T0)
    for n in range(20):
        ledger.offer(ask(n, "b"), T0)
    order = []
    holder = "a-49"
    ledger.offer(ask(50, "a"), T0)
    for n in range(51, 60):
        ledger.offer(ask(n, "a"), T0)
    for _ in range(10):
        grants = ledger.release(LeaseRelease(request_id=holder, input_tokens=50, output_tokens=50), T0)
        holder = grants[0].request_id
        order.append(holder.split("-")[0])
    assert 4 <= order.count("b") <= 6, f"b shares equally from when it arrived, not all at once: {order}"


def test_tokens_per_minute_hold_and_the_window_frees_after_a_minute():
    ledger = quota(input_tokens_per_minute=1000)
    granted = [g for n in range(30) for g in ledger.offer(ask(n, "t", tokens=200), T0)]
    assert len(granted) == 10  # 100 input tokens each
    for g in granted:  # the calls end at once, using what they reserved
        assert ledger.release(LeaseRelease(request_id=g.request_id, input_tokens=100, output_tokens=100), T0) == []
    assert ledger.view(T0).waiting == 20
    assert ledger.next_wakeup(T0) == T0 + 60
    assert len(ledger.dispatch(T0 + 60.01)) == 10


def test_a_call_still_in_flight_stays_in_the_window_until_it_ends():
    ledger = quota(requests_per_minute=1, lease_seconds=600)
    ledger.offer(ask(0, "t"), T0)
    assert ledger.offer(ask(1, "t"), T0) == []
    assert ledger.dispatch(T0 + 120) == [], "granted two minutes ago but not sent yet: still counted"
    ledger.release(LeaseRelease(request_id="t-0", input_tokens=50, output_tokens=50), T0 + 130)
    assert ledger.dispatch(T0 + 189) == [] and len(ledger.dispatch(T0 + 190.01)) == 1, "a window after it ended"


def test_reconciling_with_the_real_use_frees_what_was_reserved_but_not_used():
    ledger = quota(input_tokens_per_minute=1000)
    for n in range(12):
        ledger.offer(ask(n, "t", tokens=200), T0)  # 10 granted at 100 input tokens, 2 wait
    grants = ledger.release(LeaseRelease(request_id="t-0", input_tokens=0, output_tokens=5), T0 + 1)
    assert [g.request_id for g in grants] == ["t-10"], "the 100 tokens reserved but not used fit one more call"


def test_a_lease_never_released_expires_and_its_capacity_comes_back():
    ledger = quota(concurrent_requests=2, lease_seconds=30)
    ledger.offer(ask(0, "t"), T0)
    ledger.offer(ask(1, "t"), T0)
    assert ledger.offer(ask(2, "t"), T0) == []
    assert ledger.next_wakeup(T0) == T0 + 30
    assert [g.request_id for g in ledger.dispatch(T0 + 30)] == ["t-2"]
    assert ledger.view(T0 + 30).concurrent == 1


def test_a_call_larger_than_the_quota_itself_is_refused_at_once_not_queued_forever():
    ledger = quota(input_tokens_per_minute=100)
    (grant,) = ledger.offer(ask(0, "t", tokens=1000), T0)
    assert not grant.granted and "more than quota 'q' allows" in (grant.refused or "")


def budget(**period) -> Ledger:
    tenant = TenantBudget(name="acme", budget={"day": period}, degrade_to=[{"model": "cheap-2026-01-01"}])
    return Ledger(LedgerState(tenant=tenant))


def test_a_hard_budget_refuses_a_call_that_would_pass_it_counting_calls_in_flight():
    ledger = budget(tokens_hard=250)
    assert ledger.offer(ask(0, "acme"), T0)[0].granted
    assert ledger.offer(ask(1, "acme"), T0)[0].granted
    (refused,) = ledger.offer(ask(2, "acme"), T0)  # 200 reserved + 100 > 250
    assert not refused.granted and refused.period == "day"
    assert "'acme' day budget" in (refused.refused or "")


def test_a_soft_budget_grants_but_says_degrade_and_a_new_day_starts_from_zero():
    ledger = budget(tokens_soft=150, tokens_hard=10_000)
    assert not ledger.offer(ask(0, "acme"), T0)[0].degrade
    ledger.release(LeaseRelease(request_id="acme-0", input_tokens=50, output_tokens=50), T0)
    assert ledger.offer(ask(1, "acme"), T0)[0].degrade
    ledger.release(LeaseRelease(request_id="acme-1", input_tokens=50, output_tokens=50), T0)
    assert not ledger.offer(ask(2, "acme"), T0 + 86_400)[0].degrade
    assert ledger.view(T0 + 86_400).spent["day"].tokens == 0


def _granted(ledger: Ledger, n: int, now: float) -> list[str]:
    return [g.request_id for g in ledger.offer(ask(n, "t"), now) if g.granted]


def test_a_provider_429_halves_the_effective_limits_once_per_round_and_they_climb_back_a_step_per_quiet_window():
    from agentsteps.contracts.quotas.ledger import MIN_FACTOR, RECOVERY_STEP

    ledger = quota(requests_per_minute=16, input_tokens_per_minute=8000, window_seconds=10)
    assert [len(_granted(ledger, n, T0)) for n in range(16)] == [1] * 16
    # Three calls granted before the cut come back throttled: one cut, not three.
    for n in range(3):
        ledger.release(LeaseRelease(request_id=f"t-{n}", input_tokens=50, output_tokens=50, throttled=True), T0 + 1)
    view = ledger.view(T0 + 1)
    assert view.effective_factor == 0.5 and view.effective is not None
    assert (view.effective.requests_per_minute, view.effective.input_tokens_per_minute) == (8, 4000)
    assert view.quota is not None and view.quota.requests_per_minute == 16, "the configured limit is kept"
    for n in range(3, 16):
        ledger.release(LeaseRelease(request_id=f"t-{n}", input_tokens=50, output_tokens=50), T0 + 1)
    # The window (16 calls) is over the lowered limit: nothing more until it moves.
    assert _granted(ledger, 100, T0 + 2) == []
    # A call granted under the lowered limit that is throttled too cuts again, down to the floor at most.
    ledger.dispatch(T0 + 12)
    ledger.release(LeaseRelease(request_id="t-100", throttled=True), T0 + 12)
    assert ledger.factor(T0 + 12) == (0.5 + RECOVERY_STEP) / 2, "a window had passed: one step back, then cut"
    for n in range(101, 110):
        _granted(ledger, n, T0 + 12 + n)
        ledger.release(LeaseRelease(request_id=f"t-{n}", throttled=True), T0 + 12 + n)
    assert ledger.factor(T0 + 130) == MIN_FACTOR
    assert ledger.view(T0 + 130).effective.requests_per_minute == 2  # type: ignore[union-attr]
    # No 429 since T0 + 121: one step back per full window, up to the configured limits and no further.
    last = ledger.state.throttled_at
    assert last is not None
    assert ledger.factor(last + 9.9) == MIN_FACTOR
    assert ledger.factor(last + 10) == MIN_FACTOR + RECOVERY_STEP
    assert ledger.factor(last + 30) == MIN_FACTOR + 3 * RECOVERY_STEP
    assert ledger.factor(last + 1000) == 1.0
    assert ledger.view(last + 1000).effective == ledger.state.quota


def test_a_lowered_limit_lets_a_waiting_call_through_at_the_next_recovery_step_and_never_starves_an_idle_account():
    ledger = quota(requests_per_minute=4, window_seconds=10)
    for n in range(4):
        _granted(ledger, n, T0)
    ledger.release(LeaseRelease(request_id="t-0", throttled=True), T0)
    for n in range(1, 4):
        ledger.release(LeaseRelease(request_id=f"t-{n}"), T0)
    assert ledger.factor(T0) == 0.5
    assert _granted(ledger, 10, T0 + 10.5) == ["t-10"], "the window moved"
    assert _granted(ledger, 11, T0 + 10.6) == ["t-11"]
    assert _granted(ledger, 12, T0 + 10.7) == [], "2 of 4 while lowered"
    assert ledger.next_wakeup(T0 + 10.7) is not None
    # An account with nothing in its window grants one call even under a limit lowered below one call.
    tiny = quota(input_tokens_per_minute=150, window_seconds=10)
    _granted(tiny, 0, T0)
    tiny.release(LeaseRelease(request_id="t-0", input_tokens=50, output_tokens=50, throttled=True), T0)
    assert tiny.view(T0).effective.input_tokens_per_minute == 75  # type: ignore[union-attr]
    assert _granted(tiny, 1, T0 + 11) == ["t-1"]


def test_a_throttled_release_of_an_unknown_or_expired_lease_still_lowers_a_never_throttled_quota_but_a_tenant_ignores_it():  # noqa: E501
    ledger = quota(requests_per_minute=10)
    ledger.release(LeaseRelease(request_id="gone", throttled=True), T0)
    assert ledger.factor(T0) == 0.5
    ledger.release(LeaseRelease(request_id="gone-too", throttled=True), T0 + 1)
    assert ledger.factor(T0 + 1) == 0.5, "a lease it cannot date is not a new round"
    tenant = Ledger(LedgerState(tenant=TenantBudget(name="acme", budget={"day": {"tokens_hard": 10}})))
    tenant.release(LeaseRelease(request_id="x", throttled=True), T0)
    assert tenant.view(T0).effective_factor == 1.0


def _tenant(**budget) -> Ledger:
    return Ledger(LedgerState(tenant=TenantBudget(name="acme", lease_seconds=30, budget={"day": budget})))


def test_a_reservation_its_run_never_releases_goes_back_after_the_tenants_lease_not_a_day():
    ledger = _tenant(tokens_hard=1_000)
    assert ledger.offer(ask(0, "acme", tokens=800), T0)[0].granted
    assert not ledger.offer(ask(1, "acme", tokens=800), T0 + 29)[0].granted, "held while the lease runs"
    assert ledger.view(T0 + 29).reserved_tokens == 800
    assert ledger.next_wakeup(T0 + 1) == T0 + 30, "the account wakes when the reservation runs out"
    assert ledger.view(T0 + 30).reserved_tokens == 0, "a read sees it gone without changing the ledger"
    assert ledger.offer(ask(2, "acme", tokens=800), T0 + 30)[0].granted, "the terminated run's share is free again"


def test_a_late_release_of_an_expired_reservation_still_bills_the_real_use():
    ledger = _tenant(tokens_hard=10_000)
    ledger.offer(ask(0, "acme", tokens=800), T0)
    ledger.dispatch(T0 + 31)  # the lease ran out: swept
    ledger.release(LeaseRelease(request_id="acme-0", input_tokens=300, output_tokens=100), T0 + 40)
    assert ledger.view(T0 + 40).spent["day"].tokens == 400


def test_concurrent_reservations_that_bound_each_call_keep_spend_within_the_hard_limit():
    """Each call reserves at least what it then uses (the byte bound): however many are in flight, what the
    account grants never spends past the limit."""
    limit, used = 10_000, 650
    ledger = _tenant(tokens_hard=limit)
    granted = [n for n in range(100) if ledger.offer(ask(n, "acme", tokens=1_300), T0)[0].granted]
    for n in granted:
        ledger.release(LeaseRelease(request_id=f"acme-{n}", input_tokens=used - 50, output_tokens=50), T0 + 1)
    assert ledger.view(T0 + 1).spent["day"].tokens == len(granted) * used <= limit
    assert len(granted) == limit // 1_300
