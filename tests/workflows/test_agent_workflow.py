"""AgentWorkflow end to end: real dev server, real HTTP to the scripted model."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from agent_support import (
    FALLBACK_MODEL,
    MODEL,
    all_text,
    make_spec,
    run_agent,
    run_agent_failure,
    weather_then_answer,
)

from agentsteps.contracts import AgentInput, AgentResult, AgentState, DefaultResult, LLMConfig
from agentsteps.contracts.names import AGENT_WORKFLOW, CANCEL_SIGNAL, STATE_QUERY
from agentsteps.examples.demo_tools import NotificationLedger

OUTPUT_SCHEMA = {
    "type": "object",
    "required": ["warmest_city"],
    "properties": {"warmest_city": {"type": "string", "enum": ["Paris", "Tokyo"]}},
    "additionalProperties": False,
}


async def test_tool_using_run_completes_with_concurrent_tool_calls_and_json_answer(engine, scripted):
    scripted.set_script(weather_then_answer({"warmest_city": "Tokyo"}))
    result = await run_agent(engine.client, engine.task_queue, make_spec(output_schema=OUTPUT_SCHEMA))

    assert result.status == "completed"
    assert result.output == {"warmest_city": "Tokyo"}
    assert [s.kind for s in result.steps] == ["tool_call", "final"]
    calls = result.steps[0].tool_calls
    assert [json.loads(c.content)["city"] for c in calls] == ["Paris", "Tokyo"]
    assert not any(c.is_error for c in calls)
    assert result.usage.total_tokens == sum(s.usage.total_tokens for s in result.steps) > 0
    # The second request carried both tool results back to the model.
    second = scripted.requests[1].body
    assert [m["role"] for m in second["messages"]][-2:] == ["tool", "tool"]
    assert second["response_format"]["json_schema"]["schema"] == OUTPUT_SCHEMA


@pytest.mark.parametrize(
    ("bad_reply", "kind"),
    [
        ({"tool_calls": [{"name": "get_weather", "arguments": {"town": "Paris"}}]}, "tool_arguments_invalid"),
        ({"tool_calls": [{"name": "get_weather", "arguments": "{not json"}]}, "tool_arguments_not_json"),
        ({"tool_calls": [{"name": "launch_missiles", "arguments": {}}]}, "unknown_tool"),
        ({"json": {"warmest_city": "Berlin"}}, "response_schema_mismatch"),
        ({"content": "Tokyo, obviously"}, "response_not_json"),
        ({"json": {"warmest_city": "Tokyo"}, "usage": {"total_tokens": 999999}}, "usage_inconsistent"),
        ({"json": {"warmest_city": "Tokyo"}, "finish_reason": "length"}, "truncated"),
    ],
)
async def test_postcondition_violation_reprompts_with_the_exact_violation(engine, scripted, bad_reply, kind):
    scripted.set_script(
        {
            "rules": [
                {"match": {"role": "user", "contains": "which city"}, "times": 1, "reply": bad_reply},
                {
                    "match": {"any_contains": "broke the response contract"},
                    "reply": {"json": {"warmest_city": "Tokyo"}},
                },
            ]
        }
    )
    result = await run_agent(
        engine.client, engine.task_queue, make_spec(output_schema=OUTPUT_SCHEMA), "which city is warmest?"
    )

    assert result.status == "completed"
    assert result.output == {"warmest_city": "Tokyo"}
    assert [v.kind.value for v in result.violations] == [kind]
    reprompt = all_text(scripted.requests[1].body)
    assert kind in reprompt
    assert result.violations[0].path in reprompt


async def test_spent_reprompt_budget_falls_back_to_the_next_model_then_fails_typed(engine, scripted):
    scripted.set_script({"default": {"content": "not json at all"}})
    spec = make_spec(
        output_schema=OUTPUT_SCHEMA,
        reprompt_budget=1,
        fallback_models=[LLMConfig(model=FALLBACK_MODEL, max_tokens=256, context_window=16_000)],
    )
    error = await run_agent_failure(engine.client, engine.task_queue, spec)

    assert error.type == "ContractViolationError"
    assert error.non_retryable
    assert error.details[0]["kind"] == "response_not_json"
    assert error.details[0]["contract"] == "llm.call"
    models = [r.body["model"] for r in scripted.requests]
    # One try plus one re-prompt per model, then nothing left on the ladder.
    assert models == [MODEL, MODEL, FALLBACK_MODEL, FALLBACK_MODEL]
    # The fallback model starts from the clean history, without the failed attempts.
    assert "broke the response contract" not in all_text(scripted.requests[2].body)


async def test_fallback_model_answer_is_used_and_the_degradation_reported(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {"match": {"model": FALLBACK_MODEL}, "reply": {"json": {"warmest_city": "Paris"}}},
                {"match": {"model": MODEL}, "reply": {"content": "no json"}},
            ]
        }
    )
    spec = make_spec(
        output_schema=OUTPUT_SCHEMA,
        reprompt_budget=0,
        fallback_models=[LLMConfig(model=FALLBACK_MODEL, max_tokens=256, context_window=16_000)],
    )
    result = await run_agent(engine.client, engine.task_queue, spec)

    assert result.status == "completed"
    assert result.output == {"warmest_city": "Paris"}
    assert result.model == FALLBACK_MODEL
    assert [(d.from_model, d.to) for d in result.degradations] == [(MODEL, FALLBACK_MODEL)]


async def test_default_result_is_returned_when_every_model_is_spent(engine, scripted):
    scripted.set_script({"default": {"content": "no json"}})
    spec = make_spec(
        output_schema=OUTPUT_SCHEMA, reprompt_budget=0, default_result=DefaultResult(value={"warmest_city": "Paris"})
    )
    result = await run_agent(engine.client, engine.task_queue, spec)

    assert result.status == "completed_with_default"
    assert result.output == {"warmest_city": "Paris"}
    assert result.degradations[-1].to == "default_result"
    assert len(scripted.requests) == 1


async def test_unauthorized_provider_fails_the_run_at_once_without_retry(engine, scripted):
    scripted.set_script({"default": {"fault": {"status": 401, "message": "invalid api key provided"}}})
    error = await run_agent_failure(engine.client, engine.task_queue, make_spec(tools=[]))

    assert error.type == "NonRetryableProviderError"
    assert "invalid api key provided" in str(error)
    assert len(scripted.requests) == 1


async def test_malformed_provider_body_is_a_typed_failure(engine, scripted):
    scripted.set_script({"default": {"raw_body": "<html>gateway exploded</html>"}})
    error = await run_agent_failure(engine.client, engine.task_queue, make_spec(tools=[]))

    assert error.type == "NonRetryableProviderError"
    assert "malformed" in str(error).lower()


async def test_context_overflow_fails_fast_and_sends_nothing(engine, scripted):
    scripted.set_script({"default": {"content": "never"}})
    spec = make_spec(tools=[], model=LLMConfig(model=MODEL, max_tokens=200, context_window=300))
    error = await run_agent_failure(engine.client, engine.task_queue, spec, "word " * 500)

    assert error.type == "ContractViolationError"
    assert "context" in str(error).lower()
    assert scripted.requests == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"model": LLMConfig(model=MODEL, temperature=3)}, "$.model.temperature"),
        ({"model": LLMConfig(model="latest")}, "$.model.model"),
        ({"tools": ["get_weather", "no_such_tool"]}, "$.tools[1]"),
        ({"output_schema": {"type": "no-such-type"}}, "$.output_schema"),
    ],
)
async def test_invalid_spec_reaching_the_workflow_is_a_typed_non_retryable_failure(engine, scripted, overrides, field):
    error = await run_agent_failure(engine.client, engine.task_queue, make_spec(**overrides))

    assert error.type == "InvalidSpecError"
    assert error.non_retryable
    assert any(d["path"].startswith(field) for d in error.details)
    assert scripted.requests == []


async def test_hostile_tool_arguments_are_reprompted_not_crashed(engine, scripted):
    nested = "[" * 5000 + "]" * 5000
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "times": 1,
                    "reply": {
                        "tool_calls": [
                            {"name": "get_weather", "arguments": nested},
                            {"name": "get_weather", "arguments": {"city": "x" * 100_000}},
                        ]
                    },
                },
                {"match": {"any_contains": "broke the response contract"}, "reply": {"content": "gave up politely"}},
            ]
        }
    )
    result = await run_agent(engine.client, engine.task_queue, make_spec())

    assert result.output == "gave up politely"
    kinds = {v.kind.value for v in result.violations}
    assert kinds <= {"tool_arguments_not_json", "tool_arguments_invalid"} and kinds


async def test_side_effecting_tool_gets_a_stable_idempotency_key(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "tool_calls": [
                            {"name": "send_notification", "arguments": {"recipient": "bob", "message": "hello"}}
                        ]
                    },
                },
                {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "sent"}},
            ]
        }
    )
    result = await run_agent(engine.client, engine.task_queue, make_spec())

    assert result.output == "sent"
    delivered = NotificationLedger(engine.settings.state_dir / "notifications.db").delivered()
    assert len(delivered) == 1
    key, recipient, attempts = delivered[0]
    assert recipient == "bob" and attempts == 1
    # The key names the effect (workflow chain, step, tool, arguments), and the run records it.
    assert key.startswith("ak1-") and [e.key for e in result.effects] == [key]
    assert result.effects[0].tool == "send_notification" and result.effects[0].outcome == "done"


async def test_state_query_and_graceful_cancel(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "delay_seconds": 1.5,
                        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
                    },
                },
                {"reply": {"content": "should not be reached"}},
            ]
        }
    )
    handle = await engine.client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=make_spec(), input="weather"),
        id=f"cancel-{uuid.uuid4().hex[:8]}",
        task_queue=engine.task_queue,
        result_type=AgentResult,
    )
    await asyncio.sleep(0.5)
    state = await handle.query(STATE_QUERY, result_type=AgentState)
    assert state.status == "running" and state.model == MODEL
    await handle.signal(CANCEL_SIGNAL)
    result = await handle.result()

    assert result.status == "cancelled"
    assert [s.kind for s in result.steps] == ["tool_call"]
    assert len(scripted.requests) == 1
