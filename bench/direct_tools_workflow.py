"""The baseline for code_vs_tools.py: tool activities started straight from a workflow.

Its own module because Temporal's sandbox re-imports workflow modules, and the
benchmark script itself imports the whole engine.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentsteps.contracts import ToolCallInput, ToolCallResult
    from agentsteps.contracts.names import TOOLS_CALL


@workflow.defn(name="DirectToolCalls")
class DirectToolCalls:
    @workflow.run
    async def run(self, calls: int, concurrent: bool) -> int:
        def one(i: int) -> object:
            return workflow.execute_activity(
                TOOLS_CALL,
                ToolCallInput(name="ping", arguments=f'{{"i": {i}}}', call_id=f"c{i}", idempotency_key=f"k{i}"),
                result_type=ToolCallResult,
                start_to_close_timeout=timedelta(seconds=30),
            )

        if concurrent:
            await asyncio.gather(*(one(i) for i in range(calls)))
        else:
            for i in range(calls):
                await one(i)
        return calls
