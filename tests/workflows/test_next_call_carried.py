"""A tool-mode step's next model call carried by its only tool call (``contracts/llm/next_call.py``).

Real dev server, real HTTP to the scripted model, the engine's own worker: a step whose model asks for one
tool a retry cannot harm costs one activity, the model still reads every tool message, and any trouble with
the carried call leaves it to the run's own ``llm.call``, with the tool made once.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pydantic
import pytest
from agent_support import make_spec, start_agent, weather_then_answer
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.testing import ActivityEnvironment

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import LLMConfig, LLMRequest, LLMResponse, Message
from agentsteps.contracts.code.carried import CarryingCallInput
from agentsteps.contracts.llm.next_call import NextModelCall
from agentsteps.contracts.names import LLM_CALL_PLAN_FIRST, LLM_CALL_TOOL_CATALOG, TOOLS_CALL
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore
from agentsteps.telemetry.metrics import NEXT_MODEL_CALLS, TOOL_CALLS

CITIES = ["Paris", "Tokyo", "London"]


def _three_lookups_then_answer(fail_second_call: bool = False) -> dict:
    rules: list[dict] = [
        {"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}}
    ]
    if fail_second_call:
        rules.append({"match": {"tool_result_for": "get_weather"}, "times": 1, "reply": {"fault": {"status": 503}}})
    rules += [
        {
            "match": {"tool_result_for": "get_weather"},
            "times": 1,
            "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]},
        },
        {
            "match": {"tool_result_for": "get_weather"},
            "times": 1,
            "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "London"}}]},
        },
    ]
    return {"rules": rules, "default": {"content": "Paris, Tokyo and London looked up."}}


async def _scheduled(handle) -> list[str]:
    history = await handle.fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def _lookups() -> float:
    return TOOL_CALLS.labels(tool="get_weather", outcome="ok")._value.get()


def _carried() -> dict[str, float]:
    """``agentsteps_next_model_calls_total`` by outcome (the worker runs in this process)."""
    return {o: NEXT_MODEL_CALLS.labels(outcome=o)._value.get() for o in ("answered", "not_made", "failed")}


def _more(before: dict[str, float]) -> dict[str, float]:
    return {o: n - before[o] for o, n in _carried().items()}


async def test_a_step_with_one_retryable_tool_call_costs_one_activity_and_the_model_reads_every_result(
    engine, scripted
):
    scripted.set_script(_three_lookups_then_answer())
    before, carried = _lookups(), _carried()
    handle = await start_agent(engine.client, engine.task_queue, make_spec(tools=["get_weather"]))
    result = await handle.result()

    assert result.status == "completed"
    assert [s.kind for s in result.steps] == ["tool_call", "tool_call", "tool_call", "final"]
    assert [json.loads(s.tool_calls[0].content)["city"] for s in result.steps[:3]] == CITIES
    # The first model call is the run's own; each tool call then brings the next model call's answer.
    assert await _scheduled(handle) == [LLM_CALL_PLAN_FIRST, TOOLS_CALL, TOOLS_CALL, TOOLS_CALL]
    assert _lookups() == before + 3
    assert _more(carried) == {"answered": 3, "not_made": 0, "failed": 0}
    # The model read each tool message, after the call that asked for it.
    bodies = [r.body for r in scripted.requests]
    assert len(bodies) == 4
    for body, city in zip(bodies[1:], CITIES, strict=True):
        assert body["messages"][-1]["role"] == "tool"
        assert json.loads(body["messages"][-1]["content"])["city"] == city
        assert body["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    # Every answer is on the run's books: tokens, and each step's own time.
    assert result.usage.total_tokens == sum(s.usage.total_tokens for s in result.steps) > 0
    assert all(s.seconds >= 0 for s in result.steps)
    for earlier, later in zip(result.steps, result.steps[1:]):
        assert earlier.started_at <= later.started_at


async def test_a_failed_carried_model_call_goes_as_its_own_llm_call_and_the_tool_runs_once(engine, scripted):
    scripted.set_script(_three_lookups_then_answer(fail_second_call=True))
    before, carried = _lookups(), _carried()
    handle = await start_agent(engine.client, engine.task_queue, make_spec(tools=["get_weather"]))
    result = await handle.result()

    assert result.status == "completed"
    assert [json.loads(s.tool_calls[0].content)["city"] for s in result.steps[:3]] == CITIES
    # The 503 inside the first tool call's activity did not fail it (which would make the tool again): the
    # tool's result came alone, and the run's own llm.call made the model call, with its retries.
    scheduled = await _scheduled(handle)
    assert scheduled == [LLM_CALL_PLAN_FIRST, TOOLS_CALL, LLM_CALL_TOOL_CATALOG, TOOLS_CALL, TOOLS_CALL]
    assert _lookups() == before + 3
    assert scripted.stats()["status"] == {"200": 4, "503": 1}
    assert _more(carried) == {"answered": 2, "not_made": 0, "failed": 1}


async def test_side_effects_and_parallel_calls_keep_the_model_call_its_own(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                weather_then_answer()["rules"][0],  # two lookups at once
                {
                    "match": {"tool_result_for": "get_weather"},
                    "reply": {
                        "tool_calls": [
                            {"name": "send_notification", "arguments": {"recipient": "ops", "message": "warm"}}
                        ]
                    },
                },
            ],
            "default": {"content": "sent"},
        }
    )
    handle = await start_agent(engine.client, engine.task_queue, make_spec(tools=["get_weather", "send_notification"]))
    result = await handle.result()

    assert result.status == "completed"
    # Two calls in one step, then a tool with side effects (a retry after the model call could repeat it).
    assert await _scheduled(handle) == [
        LLM_CALL_PLAN_FIRST,
        TOOLS_CALL,
        TOOLS_CALL,
        LLM_CALL_TOOL_CATALOG,
        TOOLS_CALL,
        LLM_CALL_TOOL_CATALOG,
    ]


class City(BaseModel):
    city: str


def _weather_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool()
    def lookup(args: City) -> dict:
        return {"city": args.city, "celsius": 21}

    return registry


def _activity_env(start_to_close_seconds: float) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, start_to_close_timeout=timedelta(seconds=start_to_close_seconds), schedule_to_close_timeout=None
    )
    return env


def _carrying(request: LLMRequest, seconds: float = 30.0) -> CarryingCallInput:
    return CarryingCallInput(
        name="lookup",
        arguments='{"city": "Paris"}',
        call_id="c1",
        idempotency_key="k1",
        next_call=NextModelCall(request=request, seconds=seconds),
    )


async def test_a_carried_call_naming_another_runs_conversation_is_refused_and_the_tool_result_comes_alone(
    tmp_path, settings, scripted
):
    """A hostile ``next_call``: its request names a conversation bound to another workflow. The worker's own
    ``llm.call`` code refuses it before anything is sent; the tool's result still comes back, so the run's own
    ``llm.call`` meets the same typed refusal and nothing is lost or made twice."""
    scripted.set_script({"rules": [], "default": {"content": "must not be asked"}})
    conversations = ConversationStore(PayloadStore(LocalDirStorageDriver(tmp_path)))
    async with provider_http_client(5.0) as http:
        llm = LLMActivities(settings.providers, http, conversations=conversations)
        tools = ToolActivities(_weather_registry(), conversations=conversations, models=llm.call)
        request = LLMRequest(
            config=LLMConfig(model="scripted-2026-01-01"),
            messages=[Message.user("hi")],
            chained=True,
            owner="another-workflow/its-run",
        )
        result = await _activity_env(start_to_close_seconds=60).run(tools.call, _carrying(request))

    assert getattr(result, "next_answer", None) is None
    assert json.loads(result.content) == {"city": "Paris", "celsius": 21}
    assert scripted.requests == []


async def test_a_carried_call_without_time_for_the_model_is_not_made():
    async def never(request: LLMRequest) -> LLMResponse:
        raise AssertionError("no time was left for the model call")

    tools = ToolActivities(_weather_registry(), models=never)
    request = LLMRequest(config=LLMConfig(model="scripted-2026-01-01"), messages=[Message.user("hi")])
    carried = _carried()
    result = await _activity_env(start_to_close_seconds=5).run(tools.call, _carrying(request, seconds=30.0))

    assert not result.is_error and getattr(result, "next_answer", None) is None
    assert _more(carried) == {"answered": 0, "not_made": 1, "failed": 0}


def test_a_malformed_next_call_is_refused_typed_at_decoding():
    with pytest.raises(pydantic.ValidationError, match="seconds"):
        CarryingCallInput.model_validate(
            {
                "name": "lookup",
                "arguments": "{}",
                "call_id": "c1",
                "idempotency_key": "k1",
                "next_call": {"request": {"config": {"model": "m"}, "messages": []}, "seconds": -1},
            }
        )
