"""CPU of one OpenAI model call on the worker, by how the request is built and posted.

Three sides against the scripted model in its own process (zero delay, real
HTTP on loopback), interleaved in one process so the machine's noise hits them
alike, each on the worker's own HTTP client (``provider_http_client``):

- ``create``: ``client.chat.completions.create(...)``, what the hand-written
  loop's activity calls (the SDK transforms the params, builds the request,
  parses the answer into its model);
- ``sdk_post``: the provider as it was, posting its own encoded body through
  the SDK's ``post`` (the SDK builds the request on every call);
- ``prepared``: the provider as it is (``PreparedPost``: the SDK builds the
  request once, each call sends it with its body).

Each side answers the same request (a system prompt, ``--messages`` turns, one
tool) and parses the answer into an ``LLMResponse`` (``create``: the SDK's
``ChatCompletion``). The last line is JSON: median CPU ms per call of each
side over the rounds, and each side's ratio to ``create``.

    .venv/bin/python bench/provider_post.py [--messages 2,40] [--calls 300] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

import openai
from pydantic import SecretStr

from agentsteps.activities.llm.providers.base import PreparedPost
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.llm.providers.openai import CHAT_COMPLETIONS_PATH, OpenAIProvider, request_to_wire
from agentsteps.contracts import LLMConfig, LLMRequest, Message, ToolSchema
from model_process import free_port, scripted_model_process

WEATHER = ToolSchema(name="get_weather", description="Current weather for a city.",
                     parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
SCRIPT = {"rules": [], "default": {"content": "done"}}
SIDES = ("create", "sdk_post", "prepared")


def _request(messages: int) -> LLMRequest:
    turns = [Message.system("Be brief.")]
    for i in range(messages - 1):
        turns.append(Message.user(f"question {i}") if i % 2 == 0 else Message(role="assistant", content=f"answer {i}"))
    return LLMRequest(config=LLMConfig(model="scripted-2026-01-01", max_tokens=64), messages=turns, tools=[WEATHER])


async def measure(url: str, messages: int, calls: int, rounds: int) -> dict[str, float]:
    request = _request(messages)
    params = request_to_wire(request)
    async with provider_http_client(120.0) as http:
        prepared = OpenAIProvider(http, base_url=url, api_key=SecretStr("sk-bench"), timeout=120.0)
        sdk_post = OpenAIProvider(http, base_url=url, api_key=SecretStr("sk-bench"), timeout=120.0)
        # The same provider with no options class to build from: it posts through the SDK's post each call.
        sdk_post._post = PreparedPost(sdk_post._client, http, CHAT_COMPLETIONS_PATH, sdk_post._options, None)
        client = openai.AsyncOpenAI(api_key="sk-bench", base_url=url, http_client=http, max_retries=0,
                                    timeout=120.0)

        async def create() -> object:
            return await client.chat.completions.create(**params)

        calls_by_side = {"create": create, "sdk_post": lambda: sdk_post.complete(request),
                         "prepared": lambda: prepared.complete(request)}
        cpu: dict[str, list[float]] = {side: [] for side in SIDES}
        for round_ in range(rounds + 1):  # round 0 warms every path up
            order = SIDES[round_ % 3:] + SIDES[:round_ % 3]
            for side in order:
                call = calls_by_side[side]
                start = time.process_time()
                for _ in range(calls):
                    await call()
                if round_:
                    cpu[side].append((time.process_time() - start) * 1000 / calls)
        assert prepared._post.prepared and not sdk_post._post.prepared
    return {side: round(statistics.median(values), 3) for side, values in cpu.items()}


async def main(message_counts: list[int], calls: int, rounds: int) -> dict:
    port = free_port()
    figures: dict[str, dict] = {}
    with scripted_model_process(SCRIPT, port) as model:
        for messages in message_counts:
            ms = await measure(model.url, messages, calls, rounds)
            figures[str(messages)] = {
                "cpu_ms_per_call": ms,
                "ratio_vs_create": {side: round(ms[side] / ms["create"], 3) for side in SIDES},
                "prepared_vs_sdk_post": round(ms["prepared"] / ms["sdk_post"], 3),
            }
            print(f"{messages} messages: CPU ms per call {ms}", file=sys.stderr, flush=True)
    return {"by_messages": figures, "calls": calls, "rounds": rounds, "load_average": os.getloadavg()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", default="2,40", help="conversation lengths, comma-separated")
    parser.add_argument("--calls", type=int, default=300, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    result = asyncio.run(main([int(n) for n in args.messages.split(",")], args.calls, args.rounds))
    print(json.dumps(result))
