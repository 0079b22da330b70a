"""The baseline for step_overhead.py and throughput.py: an agent run's activity shape, doing nothing.

Its own module because Temporal's sandbox re-imports workflow modules, and the
benchmark script itself imports the whole engine.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench.noop")
async def noop(payload: str) -> str:
    return payload


@workflow.defn(name="BareAgentShape")
class BareAgentShape:
    """A tool-mode run's two-activity shape with no-op activities: per step a model call and a tool call,
    then the final model call (the hand-written loop's shape; an engine step whose tool call carries the next
    model call is one activity, so the engine can run under this floor)."""

    @workflow.run
    async def run(self, steps: int) -> int:
        for _ in range(steps):
            for _ in range(2):
                await workflow.execute_activity(noop, "x", start_to_close_timeout=timedelta(seconds=30))
        await workflow.execute_activity(noop, "final", start_to_close_timeout=timedelta(seconds=30))
        return steps
