"""The ``llm.call`` activity's own CPU per call along a conversation, with the per-prefix folds and without.

One process, no Temporal server: the activity runs in Temporal's
``ActivityEnvironment`` on a local payload store, against a provider answered
on httpx's test transport (every answer one tool call), so what is measured is
the activity itself: loading the stored prefix, the preconditions, the call
ids, the request body, the segment write. Each call sends only its new
messages, as the workflow's ``ConversationChain`` does.

Two sides, interleaved chain by chain: ``folds`` is the worker as it is;
``cold`` is the same worker whose conversation cache keeps the verified
messages but none of what calls derived from them (``contracts/llm/prefix.py``),
so every call folds the whole conversation again: the work a worker did
before the folds were kept, plus the composed encoding. The last line is JSON
with, per step count, each side's mean CPU ms per call over the chain and
over its last 20 calls, and their ratio (folds ÷ cold).

    .venv/bin/python bench/llm_call_prefix.py [--steps 20,200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from pydantic import SecretStr
from temporalio.testing import ActivityEnvironment

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.contracts import LLMConfig, LLMRequest, Message, ToolSchema
from agentsteps.contracts.config.settings import ProviderSettings
from agentsteps.contracts.llm.conversation import ConversationRef
from agentsteps.contracts.llm.prefix import KnownPrefix
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CONFIG = LLMConfig(model="scripted-2026-01-01", max_tokens=64, context_window=128_000)


class ColdConversations(ConversationStore):
    """Verified prefixes cached, what calls derived from them not: every call folds from the start."""

    async def known(self, ref: ConversationRef | None, owner: str = "") -> KnownPrefix:
        return KnownPrefix((await super().known(ref, owner)).messages)


_ANSWERS = iter(range(10**9))


def _answer(request: httpx2.Request) -> httpx2.Response:
    turn = next(_ANSWERS)  # a fresh id each answer; the body is not parsed (that is the model's CPU, not ours)
    return httpx2.Response(
        200,
        json={
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": CONFIG.model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{turn}",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    )


async def chain(activities: LLMActivities, steps: int) -> list[float]:
    """CPU seconds of each call of one conversation of ``steps`` model calls."""
    env = ActivityEnvironment()
    ref, new = None, [Message.system("Be brief."), Message.user("Weather in Paris?")]
    cpu: list[float] = []
    for n in range(steps):
        request = LLMRequest(config=CONFIG, messages=new, tools=[WEATHER], conversation=ref, chained=True)
        started = time.process_time()
        response = await env.run(activities.call, request)
        cpu.append(time.process_time() - started)
        ref, call = response.conversation, response.message.tool_calls[0]
        new = [
            response.message,
            Message(role="tool", tool_call_id=call.id, name="get_weather", content='{"temp": 21, "sky": "clear"}'),
        ]
    return cpu


async def main(step_counts: list[int], rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as state:
        store = PayloadStore(LocalDirStorageDriver(Path(state)))
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(_answer))
        settings = ProviderSettings(openai_base_url="http://model.invalid/v1", openai_api_key=SecretStr("sk-bench"))
        sides = {
            "folds": LLMActivities(settings, http, conversations=ConversationStore(store)),
            "cold": LLMActivities(settings, http, conversations=ColdConversations(store)),
        }
        for activities in sides.values():
            await chain(activities, 5)  # warm-up: imports, the first connection
        by_steps: dict[str, dict] = {}
        for steps in step_counts:
            means: dict[str, list[float]] = {side: [] for side in sides}
            tails: dict[str, list[float]] = {side: [] for side in sides}
            for round_ in range(rounds):
                order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
                for side in order:
                    cpu = await chain(sides[side], steps)
                    means[side].append(statistics.mean(cpu))
                    tails[side].append(statistics.mean(cpu[-20:]))
            figure = {f"{side}_cpu_ms_per_call": round(1000 * statistics.median(means[side]), 3) for side in sides}
            figure |= {
                f"{side}_cpu_ms_last_20_calls": round(1000 * statistics.median(tails[side]), 3) for side in sides
            }
            figure["ratio"] = round(figure["folds_cpu_ms_per_call"] / figure["cold_cpu_ms_per_call"], 3)
            figure["ratio_last_20_calls"] = round(
                figure["folds_cpu_ms_last_20_calls"] / figure["cold_cpu_ms_last_20_calls"], 3
            )
            by_steps[str(steps)] = figure
            print(
                f"{steps} calls: llm.call CPU ms/call with folds {figure['folds_cpu_ms_per_call']} "
                f"(last 20: {figure['folds_cpu_ms_last_20_calls']}), folding from scratch "
                f"{figure['cold_cpu_ms_per_call']} (last 20: {figure['cold_cpu_ms_last_20_calls']}); "
                f"ratio {figure['ratio']}",
                file=sys.stderr,
                flush=True,
            )
        await http.aclose()
    return {"by_steps": by_steps, "rounds": rounds, "load_average": os.getloadavg()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", default="20,200", help="comma-separated conversation lengths in model calls")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    summary = asyncio.run(main([int(n) for n in args.steps.split(",")], args.rounds))
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    os._exit(0)
