"""``give_up_seconds`` counts the time an activity has found its server unavailable, across attempts.

Not the time since the activity was scheduled: an activity that waited for a
worker (or sat on a killed one until its timeout) longer than the bound, then
met the server in a blip, failed at once as ``McpServerDownError`` (seen in the
soak, issue 21). Real Temporal: the activity's attempts are Temporal's retries,
and the time each found the server down reaches the next through its
heartbeat details.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

from fleet_support import Control, fleet_server, unique
from mcp_support import make_client, tool_call
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from agentsteps.activities.mcp import McpFleet
from agentsteps.contracts.mcp import McpError
from agentsteps.failures import to_application_error

GIVE_UP = 2.0
FAST = {"connect_seconds": 2, "call_seconds": 1, "list_seconds": 2}


class Attempts:
    def __init__(self, fleet: McpFleet) -> None:
        self.fleet = fleet
        self.seen: list[tuple[int, float, str]] = []
        """(attempt, monotonic time, outcome) of every attempt."""

    @activity.defn(name="give_up_probe.call")
    async def call(self) -> str:
        try:
            result = await self.fleet.call(tool_call("echo", {"text": "hi"}))
        except McpError as error:
            self.seen.append((activity.info().attempt, time.monotonic(), type(error).__name__))
            raise to_application_error(error) from None
        self.seen.append((activity.info().attempt, time.monotonic(), "ok"))
        return result.content


@workflow.defn(name="GiveUpProbe", sandboxed=False)
class GiveUpProbe:
    @workflow.run
    async def run(self, queue: str) -> str:
        try:
            return await workflow.execute_activity(
                "give_up_probe.call",
                task_queue=queue,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=0.2), maximum_interval=timedelta(seconds=0.3)
                ),
            )
        except ActivityError as error:
            cause = error.cause
            return cause.type if isinstance(cause, ApplicationError) and cause.type else "unknown"


async def test_time_waiting_for_a_worker_is_not_counted_as_the_server_down_but_retrying_on_it_is(client, tmp_path):
    control = Control(tmp_path / "c")
    control.set("down")
    name = unique("late")
    fleet = McpFleet(
        make_client({name: fleet_server(control, give_up_seconds=GIVE_UP, timeouts=FAST, breaker={"failures": 99})}, {})
    )
    attempts = Attempts(fleet)
    workflows, activities = f"give-up-wf-{uuid.uuid4().hex[:6]}", f"give-up-act-{uuid.uuid4().hex[:6]}"
    try:
        async with Worker(client, task_queue=workflows, workflows=[GiveUpProbe]):
            handle = await client.start_workflow(GiveUpProbe.run, activities, id=workflows, task_queue=workflows)
            await asyncio.sleep(GIVE_UP + 1)  # the activity waits for a worker longer than the bound
            async with Worker(client, task_queue=activities, activities=[attempts.call]):
                outcome = await handle.result()
    finally:
        await fleet.aclose()
    assert outcome == "McpServerDownError"
    first, last = attempts.seen[0], attempts.seen[-1]
    assert first[0] == 1 and first[2] == "McpUnavailableError"  # a blip after the wait is retried
    assert last[2] == "McpServerDownError" and last[0] > 2
    assert last[1] - first[1] >= GIVE_UP  # given up only after retrying through the bound
