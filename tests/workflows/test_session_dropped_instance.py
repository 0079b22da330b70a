"""A turn whose workflow instance the worker dropped issues nothing into another run.

When the worker drops a cached instance without tearing its event loop down (an
eviction it could not process, a shutdown), the garbage collector later closes
the instance's coroutines with ``GeneratorExit``, in whatever thread it runs:
a ``finally`` there that calls ``workflow.*`` acts on the workflow whose
activation happens to be running. A turn's bookkeeping (the totals upsert) then
landed in another run's history, which no replay of that run reproduces
("Update machine does not handle this event: UpsertWorkflowSearchAttributes"
under a loaded CI). ``disable_safe_eviction`` drops every evicted instance
untorn, and ``max_cached_workflows=0`` evicts after every task, so a turn
waiting on its model call is such garbage; the collector below collects it
inside its own activation.
"""

from __future__ import annotations

import gc
import uuid

from temporalio import workflow
from temporalio.api.enums.v1 import EventType

from agentsteps.client.sessions import send_turn
from agentsteps.worker import running_worker

from agent_support import make_spec
from session_support import session_id


@workflow.defn(name="TestGarbageCollectingWorkflow", sandboxed=False)
class GarbageCollectingWorkflow:
    @workflow.run
    async def run(self) -> int:
        return gc.collect()  # the dropped instances' coroutines close here, inside this run's activation


async def test_a_dropped_turn_upserts_nothing_into_the_run_that_collects_it(client, settings, scripted):
    scripted.set_script({"rules": [], "default": {"content": "noted"}})
    settings = settings.model_copy(update={"max_cached_workflows": 0})
    gc.disable()  # nothing collects the dropped instances before the collector's activation does
    try:
        async with running_worker(client, settings, extra_workflows=[GarbageCollectingWorkflow],
                                  disable_safe_workflow_eviction=True):
            result = await send_turn(client, make_spec(tools=[]), "remember PX-4417", session_id=session_id(),
                                     task_queue=settings.task_queue)
            assert result.status == "completed"
            collector = await client.start_workflow(
                GarbageCollectingWorkflow.run, id=f"gc-{uuid.uuid4().hex[:10]}", task_queue=settings.task_queue)
            assert await collector.result() > 0  # the dropped instances were there to collect
            history = await collector.fetch_history()
    finally:
        gc.enable()
    events = [EventType.Name(e.event_type) for e in history.events]
    assert "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" not in events, events
