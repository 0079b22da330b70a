"""Proof of prompt caching: a 30-step tool-mode run against the scripted model.

With cache_control marks every call after the first reads the previous prefix
from the cache, asserted on the usage the provider returned for each call as
the run recorded it in its steps, and the cost metric (cached input priced
lower) comes out below the same run without marks.
"""

from __future__ import annotations

import json
import uuid

from agent_support import make_spec, run_agent
from pydantic import SecretStr

from agentsteps.contracts import LLMConfig
from agentsteps.contracts.config.settings import PriceTable
from agentsteps.telemetry.metrics import REGISTRY
from agentsteps.worker import running_worker

STEPS = 30


def _script() -> dict:
    return {
        "rules": [
            {
                "match": {"any_contains": "weather please"},
                "times": STEPS - 1,
                "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            },
            {"match": {"any_contains": "weather please"}, "reply": {"content": "Paris is sunny."}},
        ]
    }


async def _run(client, settings, scripted, *, caching: bool) -> tuple[str, list, list]:
    model = f"claude-cache-{uuid.uuid4().hex[:6]}-20260101"
    providers = settings.providers.model_copy(
        update={"anthropic_api_key": SecretStr("sk-cache"), "prompt_caching": caching}
    )
    prices = PriceTable(
        input_per_mtok={model: 3.0},
        output_per_mtok={model: 15.0},
        cached_input_per_mtok={model: 0.3},
        cache_write_per_mtok={model: 3.75},
    )
    own = settings.model_copy(
        update={"providers": providers, "prices": prices, "task_queue": f"cache-{uuid.uuid4().hex[:8]}"}
    )
    scripted.set_script(_script())
    spec = make_spec(
        model=LLMConfig(provider="anthropic", model=model, max_tokens=256, context_window=100_000),
        tools=["get_weather"],
        max_steps=STEPS + 5,
    )
    async with running_worker(client, own):
        result = await run_agent(client, own.task_queue, spec)
    assert result.output == "Paris is sunny."
    return model, [r.body for r in scripted.requests], result.steps


def _cost(model: str) -> float:
    return REGISTRY.get_sample_value("agentsteps_llm_cost_usd_total", {"provider": "anthropic", "model": model}) or 0.0


def _tokens(model: str, direction: str) -> float:
    labels = {"provider": "anthropic", "model": model, "direction": direction}
    return REGISTRY.get_sample_value("agentsteps_llm_tokens_total", labels) or 0.0


async def test_thirty_step_run_reads_the_cache_on_every_call_after_the_first(client, settings, scripted):
    cached_model, bodies, steps = await _run(client, settings, scripted, caching=True)
    assert len(bodies) == len(steps) == STEPS
    # Every request marks the conversation's end, so the next one extends a cached prefix.
    assert all(b["messages"][-1]["content"][-1].get("cache_control") == {"type": "ephemeral"} for b in bodies)
    # The usage the provider returned for each call, as the run recorded it in its steps.
    reads = [s.usage.cache_read_tokens for s in steps]
    assert reads[0] == 0 and all(r > 0 for r in reads[1:]), reads
    assert reads == sorted(reads)  # each call reads the longer prefix the one before it wrote
    assert steps[0].usage.cache_write_tokens > 0
    assert _tokens(cached_model, "cache_read") == sum(reads)
    assert _tokens(cached_model, "cache_write") == sum(s.usage.cache_write_tokens for s in steps) > 0

    plain_model, plain_bodies, plain_steps = await _run(client, settings, scripted, caching=False)
    assert all("cache_control" not in json.dumps(b) for b in plain_bodies)
    assert all(s.usage.cache_read_tokens == 0 for s in plain_steps)
    assert _tokens(plain_model, "cache_read") == 0
    assert _cost(cached_model) < _cost(plain_model)
