"""Quotas and tenant budgets end to end: real dev server, real account workflows, real HTTP to the scripted model."""

from __future__ import annotations

import asyncio

import pytest
from quota_support import event_types, settled_account, start_run, unique, with_quotas
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.quotas import read_account
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.names import STATE_QUERY
from agentsteps.contracts.spec import AgentState
from agentsteps.worker import running_worker

MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=20, context_window=16_000)
CHEAP = "scripted-mini-2026-01-01"
USAGE = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}


def spec(**overrides) -> AgentSpec:
    return AgentSpec(**{"name": "quota", "model": MODEL, "tools": [], "max_steps": 2, **overrides})


async def test_a_run_on_a_worker_without_quotas_issues_no_quota_command_and_one_with_them_is_reconciled(
    client, settings, scripted
):
    scripted.set_script({"default": {"content": "hi", "usage": USAGE}})
    quota = unique("q")
    configured = with_quotas(settings, limits=[{"name": quota, "model": "scripted-*", "requests_per_minute": 100}])
    async with running_worker(client, settings, registry=ToolRegistry()):
        plain = await start_run(client, settings, spec())  # nothing configured on this worker: no plan
        await plain.result()
    async with running_worker(client, configured, registry=ToolRegistry()):
        leased = await start_run(client, configured, spec())
        result = await leased.result()
        view = await settled_account(client, "quota", quota)

    plain_events = await event_types(plain)
    assert not [e for e in plain_events if "SIGNAL" in e], plain_events
    leased_events = await event_types(leased)
    assert leased_events.count("EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED") == 2  # acquire, release
    assert leased_events.count("EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED") == 1  # the grant
    assert result.status == "completed"
    assert view.requests_in_window == 1
    assert (view.input_tokens_in_window, view.output_tokens_in_window) == (10, 20), "reconciled to the real use"
    assert view.concurrent == 0, "released"


async def test_a_tenant_past_its_soft_limit_is_degraded_to_its_cheaper_pinned_model(client, settings, scripted):
    scripted.set_script({"default": {"content": "hi", "usage": USAGE}})
    tenant = unique("soft")
    configured = with_quotas(
        settings,
        tenants=[
            {
                "name": tenant,
                "budget": {"day": {"tokens_soft": 1, "tokens_hard": 100_000}},
                "degrade_to": [{"model": CHEAP}],
            }
        ],
    )
    async with running_worker(client, configured, registry=ToolRegistry()):
        result = await (await start_run(client, configured, spec(), tenant=tenant)).result()
        view = await settled_account(client, "tenant", tenant)

    assert result.status == "completed"
    assert [r.body["model"] for r in scripted.requests] == [CHEAP]
    assert result.model == CHEAP
    assert view.spent["day"].tokens == 30


async def test_a_tenant_hard_limit_fails_the_run_typed_naming_tenant_and_period(client, settings, scripted):
    scripted.set_script({"default": {"content": "never sent", "usage": USAGE}})
    tenant = unique("hard")
    configured = with_quotas(settings, tenants=[{"name": tenant, "budget": {"month": {"tokens_hard": 5}}}])
    async with running_worker(client, configured, registry=ToolRegistry()):
        handle = await start_run(client, configured, spec(), tenant=tenant)
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "BudgetExceededError"
    assert tenant in cause.message and "month" in cause.message
    assert cause.details[0] == {"tenant": tenant, "period": "month"}
    assert scripted.requests == [], "nothing reached the provider"


async def test_a_call_without_capacity_waits_durably_and_the_run_says_waiting_for_quota(client, settings, scripted):
    scripted.set_script({"default": {"content": "hi", "usage": USAGE, "delay_seconds": 2}})
    quota = unique("q")
    configured = with_quotas(settings, limits=[{"name": quota, "model": "scripted-*", "concurrent_requests": 1}])
    async with running_worker(client, configured, registry=ToolRegistry()):
        first = await start_run(client, configured, spec())
        await _until(lambda: len(scripted.requests) == 1)
        second = await start_run(client, configured, spec())
        waiting = await _waiting_for_quota(second)
        view = await read_account(client, "quota", quota)
        scripted.end_delays()  # the first call held its slot while the test looked; no need to wait out the rest
        results = await asyncio.gather(first.result(), second.result())

    assert waiting.status == "waiting_for_quota"
    assert (view.concurrent, view.waiting) == (1, 1)
    assert [r.status for r in results] == ["completed", "completed"]
    assert len(scripted.requests) == 2


async def _until(predicate, timeout: float = 30.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)


async def _waiting_for_quota(handle, timeout: float = 30.0) -> AgentState:
    """The run's state once it waits for quota, or as it stands after ``timeout`` (polled, not a fixed pause)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        state = await handle.query(STATE_QUERY, result_type=AgentState)
        if state.status == "waiting_for_quota" or asyncio.get_running_loop().time() > deadline:
            return state
        await asyncio.sleep(0.1)


async def test_an_operator_raises_a_live_limit_and_the_waiting_run_goes_on(client, settings, scripted):
    from agentsteps.client.quotas import set_limits
    from agentsteps.contracts.errors import QuotaConfigError
    from agentsteps.contracts.quotas.wire import LimitChange

    scripted.set_script({"default": {"content": "hi", "usage": USAGE}})
    quota = unique("q")
    configured = with_quotas(settings, limits=[{"name": quota, "model": "scripted-*", "requests_per_minute": 1}])
    async with running_worker(client, configured, registry=ToolRegistry()):
        await (await start_run(client, configured, spec())).result()
        waiting = await start_run(client, configured, spec())  # the minute's one request is spent
        state = await _waiting_for_quota(waiting)
        with pytest.raises(QuotaConfigError, match="greater than 0"):
            await set_limits(client, "quota", quota, {"requests_per_minute": 0})
        with pytest.raises(QuotaConfigError, match="Extra inputs"):
            await set_limits(client, "quota", quota, {"requests_per_minute": 5, "evil": "x" * 10_000})
        with pytest.raises(QuotaConfigError, match="no quota account named"):
            await set_limits(client, "quota", unique("absent"), LimitChange(requests_per_minute=5))
        raised = await set_limits(client, "quota", quota, LimitChange(requests_per_minute=10))
        result = await asyncio.wait_for(waiting.result(), timeout=20)

    assert state.status == "waiting_for_quota"
    assert raised.quota is not None and raised.quota.requests_per_minute == 10
    assert result.status == "completed"


async def test_runs_and_session_turns_carry_their_tenant_and_operators_list_runs_by_it(client, settings, scripted):
    from agentsteps.client.sessions import send_turn

    scripted.set_script({"default": {"content": "hi", "usage": USAGE}})
    tenant = unique("acme")
    configured = with_quotas(settings, tenants=[{"name": tenant, "budget": {"day": {"tokens_hard": 1_000_000}}}])
    async with running_worker(client, configured, registry=ToolRegistry()):
        handle = await start_run(client, configured, spec(), tenant=tenant)
        await handle.result()
        turn = await send_turn(
            client,
            spec(),
            "hello",
            session_id=unique("s"),
            task_queue=configured.task_queue,
            tenant=tenant,
        )
        view = await settled_account(client, "tenant", tenant)
        listed = []
        for _ in range(50):  # visibility is eventually consistent
            listed = [w.id async for w in client.list_workflows(f'AgentStepsTenant = "{tenant}"')]
            if len(listed) == 2:
                break
            await asyncio.sleep(0.2)

    assert turn.status == "completed"
    assert view.spent["day"].tokens == 60, "the run's call and the turn's, both on the tenant's account"
    assert sorted(listed) == sorted([handle.id, turn.session_id])


async def test_a_hostile_tenant_on_the_input_fails_the_run_typed_before_anything_runs(client, settings, scripted):
    from agentsteps.contracts import AgentInput, AgentResult
    from agentsteps.contracts.names import AGENT_WORKFLOW

    scripted.set_script({"default": {"content": "never"}})
    async with running_worker(client, settings, registry=ToolRegistry()):
        with pytest.raises(WorkflowFailureError) as failure:
            await client.execute_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=spec(), input="hi", tenant="acme\n" + "x" * 500),
                id=unique("hostile"),
                task_queue=settings.task_queue,
                result_type=AgentResult,
            )

    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidSpecError"
    assert "$.tenant" in cause.message
    assert scripted.requests == []


async def test_a_provider_429_lowers_the_accounts_effective_limit_429s_stop_and_it_climbs_back_once_the_provider_recovers(  # noqa: E501
    client, settings, scripted
):
    """The provider allows 4 calls per window, the account was configured for 6: the first burst eats 429s
    (retried as before), its releases say so and the account halves its limit to 3, under the provider's; the
    next burst gets none (the limit stays under 4 for three quiet windows); with the provider's limit gone the
    account's climbs back a step per quiet window."""
    from agentsteps.client.quotas import read_account

    window = 3.0
    script = {
        "default": {"content": "hi", "usage": USAGE},
        "quotas": {"*": {"requests_per_minute": 4, "window_seconds": window}},
    }
    scripted.set_script(script)
    quota = unique("q")
    configured = with_quotas(
        settings,
        limits=[
            {"name": quota, "model": "scripted-*", "requests_per_minute": 6, "window_seconds": window},
        ],
    )
    async with running_worker(client, configured, registry=ToolRegistry()):
        first = [await start_run(client, configured, spec()) for _ in range(6)]
        assert [(await h.result()).status for h in first] == ["completed"] * 6
        lowered = await settled_account(client, "quota", quota)
        throttled_first = scripted.stats()["http_429"]

        scripted.set_script(script)  # counters from zero; the provider's window restarts too
        second = [await start_run(client, configured, spec()) for _ in range(6)]
        assert [(await h.result()).status for h in second] == ["completed"] * 6
        throttled_second = scripted.stats()["http_429"]

        scripted.set_script({"default": {"content": "hi", "usage": USAGE}})  # the provider recovered
        climb = [(await read_account(client, "quota", quota)).effective_factor]
        deadline = asyncio.get_running_loop().time() + 60
        while climb[-1] < 1.0 and asyncio.get_running_loop().time() < deadline:
            await (await start_run(client, configured, spec())).result()  # calls succeed again
            await asyncio.sleep(window / 2)
            climb.append((await read_account(client, "quota", quota)).effective_factor)
        recovered = await read_account(client, "quota", quota)

    assert throttled_first >= 1, "the provider's limit is below the configured quota"
    assert lowered.effective_factor < 1.0 and lowered.effective is not None
    assert lowered.effective.requests_per_minute == 3 and lowered.quota is not None
    assert lowered.quota.requests_per_minute == 6, "the configured limit is kept beside the effective one"
    assert throttled_second == 0, "the lowered limit is under the provider's: no 429 to eat"
    assert climb == sorted(climb) and len(set(climb)) > 2, f"climbs back gradually: {climb}"
    assert recovered.effective_factor == 1.0 and recovered.effective == recovered.quota
