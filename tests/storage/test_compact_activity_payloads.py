"""Activity inputs and results go into history without their default values; callers' payloads stay whole.

A real run (dev server, the engine's worker on the client ``agentsteps worker`` builds, with the engine's data
converter, the scripted model over HTTP): every ``llm.call`` and
``tools.call`` payload in its history is the compact form, and reads back to the value whose compact form it is;
the run's input and result, which callers in any language read, carry every field.
"""

from __future__ import annotations

import json
import uuid

import pytest_asyncio
from agent_support import make_spec, start_agent, weather_then_answer
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentsteps.contracts import AgentInput, AgentResult, LLMRequest, LLMResponse
from agentsteps.contracts.llm.tools import ToolCallInput, ToolCallResult
from agentsteps.contracts.names import AGENT_WORKFLOW, LLM_CALL_PLAN_FIRST
from agentsteps.contracts.quotas.plan import PlanFirstAnswer
from agentsteps.worker import build_data_converter, running_worker

_TYPES = {
    LLM_CALL_PLAN_FIRST: (LLMRequest, PlanFirstAnswer),
    "llm.call": (LLMRequest, LLMResponse),
    "tools.call": (ToolCallInput, ToolCallResult),
}


def _kind(activity_type: str) -> str | None:
    return next((kind for kind in _TYPES if activity_type.startswith(kind)), None)


@pytest_asyncio.fixture
async def history(client, settings, scripted):
    """One run's history, on the engine's own data converter (``connect`` builds every worker's client with it)."""
    engine_client = Client(**{**client.config(), "data_converter": build_data_converter(settings)})
    scripted.set_script(weather_then_answer())
    async with running_worker(engine_client, settings):
        handle = await start_agent(engine_client, settings.task_queue, make_spec())
        result = await handle.result()
    assert result.status == "completed", result
    return await handle.fetch_history()


async def test_activity_payloads_carry_no_defaults_and_read_back_to_the_value_they_were(history):
    scheduled: dict[int, str] = {}
    checked = dict.fromkeys(_TYPES, 0)
    whole = written = 0
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
            kind, payload, index = _kind(attrs.activity_type.name), attrs.input.payloads[0].data, 0
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            kind, payload, index = _kind(scheduled[attrs.scheduled_event_id]), attrs.result.payloads[0].data, 1
        else:
            continue
        if kind is None:
            continue
        value = _TYPES[kind][index].model_validate_json(payload)
        assert value.model_dump_json(exclude_defaults=True).encode() == payload, payload
        whole += len(value.model_dump_json())
        written += len(payload)
        checked[kind] += 1
    # The first model call (it asks for the quota plan), the others, and the tool calls: inputs and results.
    assert checked == {LLM_CALL_PLAN_FIRST: 2, "llm.call": 2, "tools.call": 4}, checked
    assert written < 0.8 * whole, (written, whole)  # written whole, the defaults were a fifth or more


async def test_the_runs_input_and_result_keep_every_field_for_callers(history):
    started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0].data
    completed = next(
        e.workflow_execution_completed_event_attributes.result.payloads[0].data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    )
    assert set(json.loads(started)) == set(AgentInput.model_fields)
    assert set(json.loads(completed)) == set(AgentResult.model_fields)
