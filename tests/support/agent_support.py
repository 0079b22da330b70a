"""Small builders shared by the engine tests."""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.names import AGENT_WORKFLOW, MODEL_CALLS, TOOLS_CALL

MODEL = "scripted-2026-01-01"
FALLBACK_MODEL = "scripted-fallback-2026-02-01"


def make_spec(**overrides: Any) -> AgentSpec:
    data: dict[str, Any] = {
        "name": "test",
        "model": LLMConfig(model=MODEL, max_tokens=256, context_window=16_000),
        "tools": ["get_weather", "send_notification"],
        "max_steps": 8,
    }
    data.update(overrides)
    return AgentSpec(**data)


async def start_agent(
    client: Client, task_queue: str, spec: AgentSpec, text: str = "weather please"
) -> WorkflowHandle[Any, AgentResult]:
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input=text),
        id=f"test-{uuid.uuid4().hex[:10]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )


async def run_agent(client: Client, task_queue: str, spec: AgentSpec, text: str = "weather please") -> AgentResult:
    return await (await start_agent(client, task_queue, spec, text)).result()


async def run_agent_failure(client: Client, task_queue: str, spec: AgentSpec, text: str = "hi") -> ApplicationError:
    try:
        await run_agent(client, task_queue, spec, text)
    except WorkflowFailureError as exc:
        cause = exc.cause
        while cause is not None and not isinstance(cause, ApplicationError):
            cause = cause.__cause__
        assert isinstance(cause, ApplicationError), f"expected an ApplicationError, got {exc.cause!r}"
        return cause
    raise AssertionError("the run was expected to fail")


def weather_then_answer(answer: Any = None) -> dict[str, Any]:
    """Two concurrent lookups, then a final answer."""
    final = {"json": answer} if answer is not None else {"content": "Paris 18.5C, Tokyo 24C."}
    return {
        "rules": [
            {
                "match": {"role": "user"},
                "reply": {
                    "tool_calls": [
                        {"name": "get_weather", "arguments": {"city": "Paris"}},
                        {"name": "get_weather", "arguments": {"city": "Tokyo"}},
                    ]
                },
            },
            {"match": {"tool_result_for": "get_weather"}, "reply": final},
        ]
    }


def last_message_text(request_body: dict[str, Any]) -> str:
    message = request_body["messages"][-1]
    return message.get("content") or ""


def all_text(request_body: dict[str, Any]) -> str:
    import json

    return json.dumps(request_body["messages"])


async def start_columns_without_upsert(client: Any, workflow_id: str) -> str | None:
    """The run's ``AgentStepsSpec`` column, asserting its start set it (no upsert in its history set it again)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.common import SearchAttributeKey

    from agentsteps.contracts.names import SA_SPEC

    handle = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert SA_SPEC in started.search_attributes.indexed_fields, "the start did not set the console's columns"
    upserted = [
        set(e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    assert not any(SA_SPEC in keys for keys in upserted), upserted
    value: str | None = (await handle.describe()).typed_search_attributes.get(SearchAttributeKey.for_keyword(SA_SPEC))
    return value


def model_call_events(history) -> list[tuple[str, int, dict]]:
    """Each model call a run made, in order: the name of the activity that made it, that activity's input size
    in bytes, and the request as it went into history. A call a tool step carried
    (``contracts/llm/next_call.py``) is made by ``tools.call``; its request lacks the tool message it was sent
    with, which the activity appended."""
    calls = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        scheduled = event.activity_task_scheduled_event_attributes
        name, payloads = scheduled.activity_type.name, scheduled.input.payloads
        size = sum(len(p.data) for p in payloads)
        if name in MODEL_CALLS:
            calls.append((name, size, json.loads(payloads[0].data)))
        elif name == TOOLS_CALL and (carried := json.loads(payloads[0].data).get("next_call")) is not None:
            calls.append((name, size, carried["request"]))
    return calls
