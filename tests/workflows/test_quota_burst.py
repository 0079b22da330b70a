"""A tenant's hard budget under a burst of concurrent model calls from one program: never overrun.

A hundred calls in ``make test``; ``AGENTSTEPS_BURST_CALLS=1000`` runs the thousand it ran before (83-136 s of
the suite, its longest test). On a file of its own (not in ``test_quotas.py``) so ``make test`` hands it out first.
"""

from __future__ import annotations

import os

from quota_support import settled_account, start_run, unique, with_quotas

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.worker import running_worker

MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=20, context_window=16_000)


def spec(**overrides) -> AgentSpec:
    return AgentSpec(**{"name": "quota", "model": MODEL, "tools": [], "max_steps": 2, **overrides})


# The program's own call and CALLS - 1 llm() calls, all reserved against one tenant.
CALLS = int(os.environ.get("AGENTSTEPS_BURST_CALLS", "100"))
BURST_LLM = """\
import asyncio
async def ask(i):
    try:
        return await llm(f"q{i}")
    except RuntimeError:
        return None
answers = await asyncio.gather(*[ask(i) for i in range(N)])
len([a for a in answers if a is not None])
""".replace("range(N)", f"range({CALLS - 1})")


async def test_a_burst_of_concurrent_program_llm_calls_never_overruns_the_tenant_hard_budget(
    client, settings, scripted
):
    # The provider counts the prompt itself (the scripted model: its texts' tokens); each answer is 20 tokens.
    answer = {"completion_tokens": MODEL.max_tokens}
    scripted.set_script(
        {
            "replies": [{"content": f"```python\n{BURST_LLM}```", "usage": answer}],
            "default": {"content": "an answer", "usage": answer},
        }
    )
    tenant, hard = unique("burst"), 15 * CALLS  # about half the calls fit
    configured = with_quotas(settings, tenants=[{"name": tenant, "budget": {"day": {"tokens_hard": hard}}}])
    code = spec(mode="code", token_budget=10_000_000)
    async with running_worker(client, configured, registry=ToolRegistry()):
        result = await (await start_run(client, configured, code, tenant=tenant)).result()
        view = await settled_account(client, "tenant", tenant, timeout=60)

    answered = result.output
    assert result.status == "completed"
    assert 0 < answered < CALLS - 1, "some calls fit, the rest were refused"
    assert len(scripted.requests) == 1 + answered, "refused calls never reached the provider"
    spent = view.spent["day"].tokens
    assert spent == result.usage.total_tokens, "the account reconciled every call to its real use"
    assert spent <= hard + MODEL.max_tokens, "never over the hard budget by more than one call's completion"
