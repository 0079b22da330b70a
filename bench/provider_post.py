"""CPU of one model call on the worker (OpenAI or Anthropic), by how the request is built and posted.

Three sides against the scripted model in its own process (zero delay, real
HTTP on loopback), interleaved in one process so the machine's noise hits them
alike, each on the worker's own HTTP client (``provider_http_client``):

- ``create``: ``client.chat.completions.create(...)`` (``--provider
  anthropic``: ``client.messages.create(...)``), what the hand-written loop's
  activity calls (the SDK prepares the params, builds the request, parses the
  answer into its model);
- ``sdk_post``: the provider as it was, the SDK building the request on every
  call: OpenAI posting its own encoded body through the SDK's ``post``,
  Anthropic through ``messages.with_raw_response.create``;
- ``prepared``: the provider as it is (``PreparedPost``: the SDK builds the
  request once, each call sends it with its body). On a tree without it
  (Anthropic before it) this is the provider's ``complete`` as it is there, so
  the same script measures both builds of an A/B.

Each side answers the same request (a system prompt, ``--messages`` turns, one
tool) and parses the answer into an ``LLMResponse`` (``create``: the SDK's
``ChatCompletion`` / ``Message``). The last line is JSON: median CPU ms per
call of each side over the rounds, and each side's ratio to ``create``.

    .venv/bin/python bench/provider_post.py [--provider openai] [--messages 2,40] [--calls 300] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import openai
from model_process import free_port, scripted_model_process
from pydantic import SecretStr

from agentsteps.activities.llm.providers import anthropic as anthropic_wire
from agentsteps.activities.llm.providers.anthropic import AnthropicProvider
from agentsteps.activities.llm.providers.base import PreparedPost
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.llm.providers.openai import CHAT_COMPLETIONS_PATH, OpenAIProvider, request_to_wire
from agentsteps.contracts import LLMConfig, LLMRequest, Message, ToolSchema

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SCRIPT = {"rules": [], "default": {"content": "done"}}
SIDES = ("create", "sdk_post", "prepared")


def _request(messages: int, provider: str) -> LLMRequest:
    turns = [Message.system("Be brief.")]
    for i in range(messages - 1):
        turns.append(Message.user(f"question {i}") if i % 2 == 0 else Message(role="assistant", content=f"answer {i}"))
    return LLMRequest(
        config=LLMConfig(model="scripted-2026-01-01", provider=provider, max_tokens=64), messages=turns, tools=[WEATHER]
    )


async def measure(url: str, provider: str, messages: int, calls: int, rounds: int) -> dict[str, float]:
    request = _request(messages, provider)
    async with provider_http_client(120.0) as http:
        sides = (_openai_sides if provider == "openai" else _anthropic_sides)(url, http, request)
        cpu: dict[str, list[float]] = {side: [] for side in SIDES}
        for round_ in range(rounds + 1):  # round 0 warms every path up
            order = SIDES[round_ % 3 :] + SIDES[: round_ % 3]
            for side in order:
                call = sides[side]
                start = time.process_time()
                for _ in range(calls):
                    await call()
                if round_:
                    cpu[side].append((time.process_time() - start) * 1000 / calls)
    return {side: round(statistics.median(values), 3) for side, values in cpu.items()}


def _openai_sides(url: str, http: Any, request: LLMRequest) -> dict[str, Callable[[], Awaitable[object]]]:
    params = request_to_wire(request)
    prepared = OpenAIProvider(http, base_url=url, api_key=SecretStr("sk-bench"), timeout=120.0)
    sdk_post = OpenAIProvider(http, base_url=url, api_key=SecretStr("sk-bench"), timeout=120.0)
    # The same provider with no options class to build from: it posts through the SDK's post each call.
    sdk_post._post = PreparedPost(sdk_post._client, http, CHAT_COMPLETIONS_PATH, sdk_post._options, None)
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=url, http_client=http, max_retries=0, timeout=120.0)

    async def create() -> object:
        return await client.chat.completions.create(**params)

    async def kept() -> object:
        response = await prepared.complete(request)
        assert prepared._post.prepared
        return response

    return {"create": create, "sdk_post": lambda: sdk_post.complete(request), "prepared": kept}


def _anthropic_sides(url: str, http: Any, request: LLMRequest) -> dict[str, Callable[[], Awaitable[object]]]:
    # The worker's provider settings (a timeout of its own) and a client as the hand-written loop would make it.
    params, extra_body = anthropic_wire.request_to_wire(request)
    prepared = AnthropicProvider(http, base_url=url, api_key=SecretStr("sk-bench"), timeout=120.0)
    before = AnthropicProvider(http, base_url=url, api_key=SecretStr("sk-bench"), timeout=120.0)
    client = anthropic.AsyncAnthropic(api_key="sk-bench", base_url=url, http_client=http, max_retries=0, timeout=120.0)

    async def create() -> object:
        return await client.messages.create(**params, extra_body=extra_body or None)

    async def sdk_post() -> object:
        if not hasattr(before, "_complete_by_sdk"):  # a tree before PreparedPost: complete is that path
            return await before.complete(request)
        return await before._complete_by_sdk(request, *before._prepared(request))

    async def kept() -> object:
        response = await prepared.complete(request)
        post = getattr(prepared, "_post", None)
        assert post is None or post.prepared, "the kept request was not used"
        return response

    return {"create": create, "sdk_post": sdk_post, "prepared": kept}


async def main(provider: str, message_counts: list[int], calls: int, rounds: int) -> dict:
    port = free_port()
    figures: dict[str, dict] = {}
    with scripted_model_process(SCRIPT, port) as model:
        url = model.url if provider == "openai" else model.url.removesuffix("/v1")
        for messages in message_counts:
            ms = await measure(url, provider, messages, calls, rounds)
            figures[str(messages)] = {
                "cpu_ms_per_call": ms,
                "ratio_vs_create": {side: round(ms[side] / ms["create"], 3) for side in SIDES},
                "prepared_vs_sdk_post": round(ms["prepared"] / ms["sdk_post"], 3),
            }
            print(f"{messages} messages: CPU ms per call {ms}", file=sys.stderr, flush=True)
    return {
        "provider": provider,
        "by_messages": figures,
        "calls": calls,
        "rounds": rounds,
        "load_average": os.getloadavg(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--messages", default="2,40", help="conversation lengths, comma-separated")
    parser.add_argument("--calls", type=int, default=300, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    result = asyncio.run(main(args.provider, [int(n) for n in args.messages.split(",")], args.calls, args.rounds))
    print(json.dumps(result))
