"""A one-shot tool-mode run's schemas are in its history once: later model calls name the stored catalog.

The catalog is reachable from the open run (the payload gc keeps it), any
worker reads it back, and the model gets the run's tools on every call.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta, timezone

from agent_support import make_spec
from approval_support import REFUND_SCRIPT, approval_worker
from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import Replayer
from test_approvals import decide, pending

from agentsteps.client.payload_gc import collect_garbage
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW, APPROVE_UPDATE, LLM_CALL_PLAN_FIRST, LLM_CALL_TOOL_CATALOG
from agentsteps.storage.payload_store import build_payload_store
from agentsteps.workflows.agent import AgentWorkflow

DESCRIPTIONS = ("Refund an order.", "Look an order up.")


def _scheduled(history) -> list[tuple[str, dict]]:
    return [
        (
            e.activity_task_scheduled_event_attributes.activity_type.name,
            json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data),
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def _events_holding(history, text: str) -> list[str]:
    return [
        EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        for e in history.events
        if text.encode() in e.SerializeToString()
    ]


async def test_later_calls_name_the_catalog_which_outlives_gc_and_loads_on_another_worker(client, settings, scripted):
    scripted.set_script(REFUND_SCRIPT)
    ran: list[str] = []
    workflow_id = f"test-catalog-{uuid.uuid4().hex[:10]}"
    async with approval_worker(client, settings, ran):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(tools=["refund", "lookup"]), input="refund A-17"),
            id=workflow_id,
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        waiting = []
        for _ in range(1200):  # generous: a loaded machine
            try:
                waiting = await pending(client, workflow_id)
            except RPCError:  # not started yet
                waiting = []
            if waiting:
                break
            await asyncio.sleep(0.1)
        assert waiting, "the refund never started waiting for approval"

    # While the run waits, a gc as if a month had passed: what the open run reaches is kept, the catalog too.
    [(first_name, _)] = _scheduled(await handle.fetch_history())[:1]
    assert first_name == LLM_CALL_PLAN_FIRST  # it resolves the tool names (and asks the worker's quota plan)
    resolved = [
        e for e in (await handle.fetch_history()).events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ][0]
    ref = json.loads(resolved.activity_task_completed_event_attributes.result.payloads[0].data)["response"]["tools_ref"]
    store = build_payload_store(settings)
    catalog_file = store.driver.path_for(ref["claim"]["hash_value"])
    assert catalog_file.exists() and ref["count"] == 2
    unreachable = await store.put(b"nobody names this " * 10)
    later = datetime.now(timezone.utc) + timedelta(days=31)
    report = await collect_garbage(client, store, timedelta(days=30), delete=True, now=later)
    assert unreachable["hash_value"] in [o.digest for o in report.garbage], "the gc deleted what nothing reaches"
    assert catalog_file.exists(), "the gc collected a catalog an open run still names"

    # Another worker (its caches empty) takes the run's next call and reads the catalog from the store.
    async with approval_worker(client, settings, ran):
        await decide(client, workflow_id, APPROVE_UPDATE, waiting[0].approval_id)
        result = await asyncio.wait_for(handle.result(), timeout=120)
        history = await handle.fetch_history()

    assert result.status == "completed" and len(ran) == 1
    # The model got both tools on every call, the same schemas each time.
    sent = [r.body["tools"] for r in scripted.requests]
    assert len(sent) == 2 and sent[0] == sent[1] and len(sent[0]) == 2
    calls = [(name, body) for name, body in _scheduled(history) if name.startswith("llm.call")]
    assert [name for name, _ in calls] == [LLM_CALL_PLAN_FIRST, LLM_CALL_TOOL_CATALOG]
    later_call = calls[1][1]
    assert later_call["tools_ref"] == ref and not later_call.get("tools")
    # The schemas are in history once: the resolving call's result.
    for text in DESCRIPTIONS:
        assert _events_holding(history, text) == ["ACTIVITY_TASK_COMPLETED"], text
    await Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter).replay_workflow(history)
    await store.aclose()
