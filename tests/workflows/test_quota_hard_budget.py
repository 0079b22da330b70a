"""A hard budget holds whatever the concurrency, and a run that never releases holds nothing past its lease.

Real dev server, real account workflows, real HTTP to the scripted model, which
reports the usage a real provider would: more prompt tokens than the worker's
own tokenizer counts (a long English prompt), never more than its bytes.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from quota_support import settled_account, start_run, unique, with_quotas
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.quotas import read_account
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.llm.tokens import count_text_tokens
from agentsteps.worker import running_worker

MODEL = "scripted-2026-01-01"
MAX_TOKENS = 50
LIMIT = 8_000
RUNS = 12
"""Old reservations (the worker's count) let 15 such calls in at once, 14,250 tokens; the bound lets 3."""
PROMPT = (
    "Please read the following account of the quarterly review carefully and summarise the decisions that "
    "were taken, the people who own each of them, and the dates by which they are due. "
) * 12
PROVIDER_PROMPT_TOKENS = 900
"""What the scripted provider says the prompt cost: about twice the worker's own count, under its bytes."""


def _spec(max_tokens: int = MAX_TOKENS) -> AgentSpec:
    model = LLMConfig(model=MODEL, max_tokens=max_tokens, context_window=16_000)
    return AgentSpec(name="hard", model=model, tools=[], max_steps=2)


async def test_concurrent_calls_never_spend_past_a_hard_limit_by_more_than_one_max_tokens(client, settings, scripted):
    assert count_text_tokens(PROMPT) * 1.8 < PROVIDER_PROMPT_TOKENS < len(PROMPT.encode())
    usage = {"prompt_tokens": PROVIDER_PROMPT_TOKENS, "completion_tokens": MAX_TOKENS}
    scripted.set_script({"default": {"content": "summary", "usage": usage, "delay_seconds": 1.0}})
    tenant = unique("finance")
    configured = with_quotas(settings, tenants=[{"name": tenant, "budget": {"day": {"tokens_hard": LIMIT}}}])
    async with running_worker(client, configured, registry=ToolRegistry()):
        handles = await asyncio.gather(
            *(start_run(client, configured, _spec(), PROMPT, tenant=tenant) for _ in range(RUNS))
        )
        outcomes = await asyncio.gather(*(h.result() for h in handles), return_exceptions=True)
        view = await settled_account(client, "tenant", tenant)

    completed = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, WorkflowFailureError)]
    assert len(completed) + len(refused) == RUNS, outcomes
    assert all(isinstance(r.cause, ApplicationError) and r.cause.type == "BudgetExceededError" for r in refused)
    assert completed, "calls that fit are served"
    spent = view.spent["day"].tokens
    assert spent == len(completed) * (PROVIDER_PROMPT_TOKENS + MAX_TOKENS), "billed what the provider reported"
    assert spent <= LIMIT + MAX_TOKENS, f"spent {spent} past the hard limit {LIMIT}"
    assert len(scripted.requests) == len(completed), "a refused call never reached the provider"


async def test_a_terminated_runs_reservation_is_freed_within_the_lease_and_the_next_call_is_served(
    client, settings, scripted
):
    lease = 3.0
    scripted.set_script({"default": {"content": "never answered in time", "delay_seconds": 30}})
    tenant = unique("term")
    # One call's reservation (1,000 max_tokens and a short prompt) fits; two do not.
    configured = with_quotas(
        settings, tenants=[{"name": tenant, "lease_seconds": lease, "budget": {"day": {"tokens_hard": 1_600}}}]
    )
    big = _spec(max_tokens=1_000)
    async with running_worker(client, configured, registry=ToolRegistry()):
        doomed = await start_run(client, configured, big, tenant=tenant)
        deadline = time.monotonic() + 30
        while not scripted.requests:
            assert time.monotonic() < deadline, "the doomed run's call never reached the provider"
            await asyncio.sleep(0.05)
        held = await read_account(client, "tenant", tenant)
        with pytest.raises(WorkflowFailureError) as refused:
            await (await start_run(client, configured, big, tenant=tenant)).result()
        await doomed.terminate("an operator ended it mid-call")
        terminated_at = time.monotonic()
        while (await read_account(client, "tenant", tenant)).reserved_tokens:
            assert time.monotonic() - terminated_at < lease + 5, "the terminated run's reservation was never freed"
            await asyncio.sleep(0.1)
        scripted.set_script({"default": {"content": "served"}})
        after = await asyncio.wait_for((await start_run(client, configured, big, tenant=tenant)).result(), 30)

    assert held.reserved_tokens > 1_000
    assert isinstance(refused.value.cause, ApplicationError) and refused.value.cause.type == "BudgetExceededError"
    assert after.status == "completed" and after.output == "served"
