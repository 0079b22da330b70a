"""What the docs say a quota or a soft budget did is what happened: the result lists each degradation,
and a call waiting for its quota is counted while it waits (real dev server, real accounts, real HTTP)."""

from __future__ import annotations

import asyncio

from quota_support import start_run, unique, with_quotas

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.names import STATE_QUERY
from agentsteps.contracts.spec import AgentState
from agentsteps.telemetry.metrics import REGISTRY
from agentsteps.telemetry.runtime import collector_for
from agentsteps.worker import running_worker

MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=20, context_window=16_000)
CHEAP = "scripted-mini-2026-01-01"
USAGE = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}


def spec(**overrides) -> AgentSpec:
    return AgentSpec(**{"name": "quota", "model": MODEL, "tools": [], "max_steps": 3, **overrides})


async def test_every_call_a_soft_budget_moved_to_a_cheaper_model_is_in_the_results_degradations(
    client, settings, scripted
):
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

    assert [r.body["model"] for r in scripted.requests] == [CHEAP]
    [moved] = result.degradations
    assert (moved.step, moved.from_model, moved.to) == (0, MODEL.model, CHEAP)
    assert tenant in moved.reason.message and moved.reason.contract == "tenant_budget"


def quota_waits(quota: str) -> float:
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name == "agentsteps_quota_waits_total" and sample.labels.get("quota") == quota:
                return sample.value
    return 0.0


async def test_a_call_waiting_for_its_quota_is_counted_while_it_waits(metered_client, settings, scripted):
    scripted.set_script({"default": {"content": "hi", "usage": USAGE, "delay_seconds": 3}})
    quota = unique("q")
    configured = with_quotas(settings, limits=[{"name": quota, "model": "scripted-*", "concurrent_requests": 1}])
    collector = collector_for(REGISTRY)
    assert collector is not None
    async with running_worker(metered_client, configured, registry=ToolRegistry()):
        first = await start_run(metered_client, configured, spec())
        while not scripted.requests:
            await asyncio.sleep(0.05)
        second = await start_run(metered_client, configured, spec())
        counted = 0.0
        for _ in range(40):  # the account queues it, then the metric buffer is drained
            collector.drain()
            counted = quota_waits(quota)
            if counted:
                break
            await asyncio.sleep(0.1)
        state = await second.query(STATE_QUERY, result_type=AgentState)
        await asyncio.gather(first.result(), second.result())
        collector.drain()

    assert state.status == "waiting_for_quota", "counted before the wait ended"
    assert counted == 1.0
    assert quota_waits(quota) == 1.0, "not counted again when the grant came"
