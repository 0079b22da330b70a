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

import asyncio
import gc
import uuid

from agent_support import make_spec
from quota_support import start_run, unique, with_quotas
from session_support import session_id
from temporalio import workflow
from temporalio.api.enums.v1 import EventType

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.sessions import send_turn
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.worker import running_worker


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
        async with running_worker(
            client, settings, extra_workflows=[GarbageCollectingWorkflow], disable_safe_workflow_eviction=True
        ):
            result = await send_turn(
                client, make_spec(tools=[]), "remember PX-4417", session_id=session_id(), task_queue=settings.task_queue
            )
            assert result.status == "completed"
            collector = await client.start_workflow(
                GarbageCollectingWorkflow.run, id=f"gc-{uuid.uuid4().hex[:10]}", task_queue=settings.task_queue
            )
            assert await collector.result() > 0  # the dropped instances were there to collect
            history = await collector.fetch_history()
    finally:
        gc.enable()
    events = [EventType.Name(e.event_type) for e in history.events]
    assert "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES" not in events, events


async def test_a_dropped_run_sends_no_quota_release_from_the_run_that_collects_it(client, settings, scripted):
    # The run's model call is still out when its instance is dropped: the coroutine waits inside the quota's
    # lease, whose release is a signal. Sent by the collector's activation it would be a command of that run.
    scripted.set_script({"rules": [], "default": {"content": "ok", "delay_seconds": 3.0}})
    configured = with_quotas(
        settings.model_copy(update={"max_cached_workflows": 0}),
        limits=[{"name": unique("q"), "model": "scripted-*", "requests_per_minute": 100}],
    )
    gc.disable()
    try:
        async with running_worker(
            client,
            configured,
            registry=ToolRegistry(),
            extra_workflows=[GarbageCollectingWorkflow],
            disable_safe_workflow_eviction=True,
        ):
            run = await start_run(
                client,
                configured,
                AgentSpec(
                    name="dropped",
                    model=LLMConfig(model="scripted-2026-01-01", max_tokens=20, context_window=16_000),
                    tools=[],
                    max_steps=2,
                ),
            )
            await _until_the_model_is_called(scripted)
            collector = await client.start_workflow(
                GarbageCollectingWorkflow.run, id=f"gc-{uuid.uuid4().hex[:10]}", task_queue=configured.task_queue
            )
            assert await collector.result() > 0
            history = await collector.fetch_history()
            assert (await run.result()).status == "completed", "the run itself goes on from its history"
    finally:
        gc.enable()
    events = [EventType.Name(e.event_type) for e in history.events]
    assert not [e for e in events if "SIGNAL" in e or "UPSERT" in e], events


async def _until_the_model_is_called(scripted) -> None:
    for _ in range(600):
        if scripted.requests:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the run never called its model")
