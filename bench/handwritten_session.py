"""The hand-written session loop, the baseline ``fleet.py`` measures the engine's session turn against.

What a team writes first for a multi-turn conversation on Temporal: one
workflow per conversation, the message list in workflow state, each turn an
Update that runs ``handwritten_workflow.py``'s activities (the whole list to
one ``hand.chat`` per model call through the official ``openai`` SDK, one
``hand.get_weather`` per tool call), and a ``close`` Update. No payload
store, no contracts, no continue-as-new (its history grows with the
conversation). Its own module because Temporal's sandbox re-imports workflow
modules.

    python bench/handwritten_session.py ADDRESS TASK_QUEUE OPENAI_BASE_URL

serves it on ``TASK_QUEUE``, prints ``ready`` and runs until terminated.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from handwritten_workflow import HandwrittenActivities

_TIMEOUT = timedelta(seconds=60)
MAX_STEPS = 4


@workflow.defn(name="HandwrittenSession")
class HandwrittenSession:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
        self.busy = False
        self.closed = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.closed and not self.busy)
        return len(self.messages)

    @workflow.update
    async def turn(self, text: str) -> str:
        self.busy = True
        try:
            self.messages.append({"role": "user", "content": text})
            for _ in range(MAX_STEPS):
                reply = await workflow.execute_activity(
                    "hand.chat", self.messages, result_type=dict[str, Any], start_to_close_timeout=_TIMEOUT
                )
                self.messages.append(reply)
                calls = reply.get("tool_calls") or []
                if not calls:
                    return str(reply.get("content", ""))
                results = await asyncio.gather(
                    *(
                        workflow.execute_activity(
                            "hand.get_weather",
                            c["function"]["arguments"],
                            result_type=str,
                            start_to_close_timeout=_TIMEOUT,
                        )
                        for c in calls
                    )
                )
                self.messages += [
                    {"role": "tool", "tool_call_id": c["id"], "content": r} for c, r in zip(calls, results)
                ]
            return ""
        finally:
            self.busy = False

    @turn.validator
    def _one_at_a_time(self, text: str) -> None:
        if self.busy or self.closed:
            raise ValueError("busy or closed")

    @workflow.update
    async def close(self) -> None:
        self.closed = True


async def _serve(address: str, task_queue: str, base_url: str) -> None:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    from agentsteps.worker import settle_heap

    client = await Client.connect(address, data_converter=pydantic_data_converter)
    hand = HandwrittenActivities(base_url)
    async with Worker(
        client, task_queue=task_queue, workflows=[HandwrittenSession], activities=[hand.chat, hand.get_weather]
    ):
        settle_heap()
        print("ready", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


if __name__ == "__main__":
    try:
        asyncio.run(_serve(*sys.argv[1:4]))
    finally:
        sys.stdout.flush()
        os._exit(0)  # temporalio issue #300
