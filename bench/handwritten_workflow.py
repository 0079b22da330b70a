"""The honest baseline for step_overhead.py and throughput.py: the loop a team writes with no framework.

A workflow keeps the message list (OpenAI's own dicts) and sends all of it to
one activity that calls the official ``openai`` SDK; each tool call the model
asks for is one activity, run concurrently, with the same tool and the same
pydantic data converter as the engine. No contracts, no effect keys, no
payload store: what a team would write first. Its own module because
Temporal's sandbox re-imports workflow modules, and the benchmark scripts
import the whole engine.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    import openai

    from agentsteps.examples.demo_tools import _WEATHER, WeatherQuery

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": WeatherQuery.model_json_schema(),
    },
}


class HandwrittenActivities:
    """One ``AsyncOpenAI`` client per worker, as a team would keep it."""

    def __init__(self, base_url: str) -> None:
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)

    @activity.defn(name="hand.chat")
    async def chat(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        completion = await self._client.chat.completions.create(
            model="scripted-2026-01-01",
            messages=messages,
            tools=[WEATHER_TOOL],
            max_completion_tokens=64,
        )
        return completion.choices[0].message.model_dump(exclude_none=True)

    @activity.defn(name="hand.get_weather")
    async def get_weather(self, arguments: str) -> str:
        query = WeatherQuery.model_validate_json(arguments)
        found = _WEATHER.get(query.city.strip().lower())
        if found is None:
            return f"error: no weather station for {query.city!r}"
        return json.dumps({"city": query.city, "temperature_c": found[0], "conditions": found[1]})


_TIMEOUT = timedelta(seconds=60)


@workflow.defn(name="HandwrittenAgentLoop")
class HandwrittenAgentLoop:
    @workflow.run
    async def run(self, prompt: str, max_steps: int) -> int:
        """The number of model calls it took to get an answer."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a helpful agent."},
            {"role": "user", "content": prompt},
        ]
        for step in range(1, max_steps + 1):
            reply = await workflow.execute_activity(
                "hand.chat", messages, result_type=dict[str, Any], start_to_close_timeout=_TIMEOUT
            )
            messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return step
            results = await asyncio.gather(
                *(
                    workflow.execute_activity(
                        "hand.get_weather", c["function"]["arguments"], result_type=str, start_to_close_timeout=_TIMEOUT
                    )
                    for c in calls
                )
            )
            messages += [{"role": "tool", "tool_call_id": c["id"], "content": r} for c, r in zip(calls, results)]
        raise ApplicationError(f"no answer within {max_steps} steps", non_retryable=True)
