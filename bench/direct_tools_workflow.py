"""The baselines for code_vs_tools.py: tool activities started straight from a workflow.

``DirectToolCalls`` is what a hand-written workflow pays per tool call. With
``segment`` set, each pause also runs one no-op local activity, the shape code
mode has (a ``code.resume`` local activity after each pause) with none of its
work: the least any design that runs a program segment as a local activity per
pause can cost.

Its own module because Temporal's sandbox re-imports workflow modules, and the
benchmark script itself imports the whole engine.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agentsteps.contracts import ToolCallInput, ToolCallResult
    from agentsteps.contracts.names import TOOLS_CALL


@activity.defn(name="bench.noop_segment")
async def noop_segment(calls: int) -> int:
    return calls


@workflow.defn(name="DirectToolCalls")
class DirectToolCalls:
    @workflow.run
    async def run(self, calls: int, concurrent: bool, segment: bool = False) -> int:
        def one(i: int) -> object:
            return workflow.execute_activity(
                TOOLS_CALL,
                ToolCallInput(name="ping", arguments=f'{{"i": {i}}}', call_id=f"c{i}", idempotency_key=f"k{i}"),
                result_type=ToolCallResult,
                start_to_close_timeout=timedelta(seconds=30),
            )

        async def pause_done(count: int) -> None:
            if segment:
                await workflow.execute_local_activity(noop_segment, count, start_to_close_timeout=timedelta(seconds=30))

        if concurrent:
            if calls:
                await asyncio.gather(*(one(i) for i in range(calls)))
                await pause_done(calls)
        else:
            for i in range(calls):
                await one(i)
                await pause_done(1)
        return calls
