"""The ``llm.call`` activity, run through Temporal's ActivityEnvironment against the scripted server."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from pydantic import BaseModel, SecretStr
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import LLMConfig, LLMRequest, LLMResponse, Message, ToolSchema, ViolationKind
from agentsteps.contracts.config.settings import PriceTable, ProviderSettings
from agentsteps.contracts.names import LLM_CALL
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.telemetry.metrics import REGISTRY


class CityQuery(BaseModel):
    city: str


KEY = "sk-activity-secret-9f8e7d6c"
WEATHER = ToolSchema(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def settings_for(server: ScriptedModelServer, **overrides) -> ProviderSettings:
    values = {
        "openai_base_url": server.url_openai,
        "openai_api_key": SecretStr(KEY),
        "anthropic_base_url": server.url_anthropic,
        "anthropic_api_key": SecretStr(KEY),
        "request_timeout_seconds": 5.0,
    }
    return ProviderSettings(**{**values, **overrides})


def unique_model(provider: str = "openai") -> str:
    # A fresh pinned name per test keeps metric samples independent; each provider has its own snapshot form.
    return f"scripted-{uuid.uuid4().hex[:8]}-" + ("20250101" if provider == "anthropic" else "2025-01-01")


def llm_request(model: str, provider: str = "openai", **config) -> LLMRequest:
    return LLMRequest(
        config=LLMConfig(provider=provider, model=model, max_tokens=256, context_window=8192, **config),
        messages=[Message.system("Be brief."), Message.user("Weather in Paris?")],
        tools=[WEATHER],
    )


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def run(activities: LLMActivities, req: LLMRequest) -> LLMResponse:
    return await ActivityEnvironment().run(activities.call, req)


def test_activity_is_registered_under_the_stable_name():
    assert activity._Definition.must_from_callable(LLMActivities.call).name == "llm.call"


async def test_ok_call_returns_the_response_and_records_usage_and_cost(server, http):
    server.set_script(
        {
            "default": {
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
                "usage": {"prompt_tokens": 2_000, "completion_tokens": 500},
            }
        }
    )
    model = unique_model()
    prices = PriceTable(input_per_mtok={model: 3.0}, output_per_mtok={model: 15.0})
    response = await run(LLMActivities(settings_for(server), http, prices), llm_request(model))

    assert response.violations == []
    assert response.tool_calls[0].name == "get_weather"
    labels = {"provider": "openai", "model": model}
    assert sample("agentsteps_llm_tokens_total", **labels, direction="input") == 2_000
    assert sample("agentsteps_llm_tokens_total", **labels, direction="output") == 500
    assert sample("agentsteps_llm_cost_usd_total", **labels) == pytest.approx((2_000 * 3 + 500 * 15) / 1e6)
    assert sample("agentsteps_llm_requests_total", **labels, outcome="ok") == 1
    assert sample("agentsteps_llm_request_seconds_count", **labels) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_precondition_violation_fails_fast_without_any_http_request(server, http, provider):
    server.set_script({"default": {"content": "should never be sent"}})
    model = unique_model(provider)
    checks_before = sample("agentsteps_contract_checks_total", contract="llm.call", phase="pre", outcome="fail")
    others_before = sample("agentsteps_llm_requests_total", provider=provider, model="other", outcome="precondition")
    with pytest.raises(ApplicationError) as err:
        await run(LLMActivities(settings_for(server), http), llm_request(model, provider, temperature=3.0))

    assert err.value.type == "ContractViolationError"
    assert err.value.non_retryable
    [violations] = err.value.details
    assert violations[0]["kind"] == ViolationKind.temperature_out_of_range.value
    assert violations[0]["path"].endswith("temperature")
    assert "temperature" in str(err.value)
    assert server.requests == []
    # A model no provider served and the operator did not price is "other": a spec cannot mint series.
    assert (
        sample("agentsteps_llm_requests_total", provider=provider, model="other", outcome="precondition")
        == others_before + 1
    )
    assert sample("agentsteps_llm_requests_total", provider=provider, model=model, outcome="precondition") == 0
    assert (
        sample("agentsteps_contract_checks_total", contract="llm.call", phase="pre", outcome="fail")
        == checks_before + 1
    )


async def test_postcondition_violations_are_returned_as_values(server, http):
    server.set_script(
        {"default": {"tool_calls": [{"name": "get_weather", "arguments": '{"city": '}], "finish_reason": "length"}}
    )
    model = unique_model()
    response = await run(LLMActivities(settings_for(server), http), llm_request(model))

    kinds = {v.kind for v in response.violations}
    assert ViolationKind.truncated in kinds
    assert ViolationKind.tool_arguments_not_json in kinds
    assert all(v.phase == "post" and v.contract == "llm.call" for v in response.violations)
    assert sample("agentsteps_llm_requests_total", provider="openai", model=model, outcome="violation") == 1
    assert sample("agentsteps_contract_violations_total", contract="llm.call", phase="post", kind="truncated") >= 1


async def test_anthropic_unknown_tool_is_a_postcondition_violation(server, http):
    server.set_script({"default": {"tool_calls": [{"name": "launch_rocket", "arguments": {}}]}})
    response = await run(LLMActivities(settings_for(server), http), llm_request(unique_model("anthropic"), "anthropic"))
    assert [v.kind for v in response.violations] == [ViolationKind.unknown_tool]
    assert response.provider == "anthropic"


async def test_429_becomes_a_retryable_application_error_with_next_retry_delay(server, http):
    server.set_script({"default": {"fault": {"status": 429, "retry_after": "7", "message": "rate limited"}}})
    model = unique_model()
    with pytest.raises(ApplicationError) as err:
        await run(LLMActivities(settings_for(server), http), llm_request(model))
    assert err.value.type == "RetryableProviderError"
    assert not err.value.non_retryable
    assert err.value.next_retry_delay == timedelta(seconds=7)
    assert sample("agentsteps_llm_requests_total", provider="openai", model=model, outcome="retryable_error") == 1


async def test_timeout_from_settings_becomes_a_retryable_error(server, http):
    server.set_script({"default": {"content": "late", "delay_seconds": 1.0}})
    activities = LLMActivities(settings_for(server, request_timeout_seconds=0.2), http)
    with pytest.raises(ApplicationError) as err:
        await run(activities, llm_request(unique_model()))
    assert err.value.type == "RetryableProviderError" and not err.value.non_retryable
    assert err.value.next_retry_delay is None


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_401_is_non_retryable_and_never_shows_the_key(server, http, provider):
    server.set_script({"default": {"fault": {"status": 401, "message": f"Incorrect API key provided: {KEY}"}}})
    model = unique_model(provider)
    others_before = sample("agentsteps_llm_requests_total", provider=provider, model="other", outcome="fatal_error")
    with pytest.raises(ApplicationError) as err:
        await run(LLMActivities(settings_for(server), http), llm_request(model, provider))
    assert err.value.type == "NonRetryableProviderError" and err.value.non_retryable
    assert "Incorrect API key provided" in str(err.value)
    chain = [err.value, err.value.__cause__]
    assert all(KEY not in str(e) and KEY not in repr(getattr(e, "args", ())) for e in chain if e is not None)
    # Rejected and never served nor priced: counted under "other" (a 404 for a made-up model mints nothing).
    assert (
        sample("agentsteps_llm_requests_total", provider=provider, model="other", outcome="fatal_error")
        == others_before + 1
    )


async def test_malformed_body_is_a_non_retryable_typed_failure(server, http):
    server.set_script({"default": {"raw_body": '{"choices": "nope"}'}})
    with pytest.raises(ApplicationError) as err:
        await run(LLMActivities(settings_for(server), http), llm_request(unique_model()))
    assert err.value.type == "NonRetryableProviderError" and err.value.non_retryable
    assert "malformed provider response" in str(err.value)


async def test_missing_openai_key_for_the_official_api_names_the_env_var(http):
    activities = LLMActivities(ProviderSettings(), http)
    with pytest.raises(ApplicationError) as err:
        await run(activities, llm_request(unique_model()))
    assert err.value.type == "NonRetryableProviderError" and err.value.non_retryable
    assert "OPENAI_API_KEY" in str(err.value)


async def test_missing_anthropic_key_for_anthropics_own_api_names_the_env_var(server, http):
    # A local Anthropic-compatible server needs no key (as OpenAI's); Anthropic's own API does.
    server.set_script({"default": {"content": "unused"}})
    official = settings_for(server, anthropic_api_key=None, anthropic_base_url="https://api.anthropic.com")
    activities = LLMActivities(official, http)
    with pytest.raises(ApplicationError) as err:
        await run(activities, llm_request(unique_model("anthropic"), "anthropic"))
    assert "ANTHROPIC_API_KEY" in str(err.value) and err.value.non_retryable
    assert server.requests == []


async def test_local_openai_compatible_server_works_without_a_key(server, http):
    server.set_script({"default": {"content": "local model here"}})
    activities = LLMActivities(settings_for(server, openai_api_key=None), http)
    response = await run(activities, llm_request(unique_model()))
    assert response.message.content == "local model here"
    assert "authorization" not in server.requests[-1].headers


# ------------------------------------------------------------------ through a real Temporal dev server


@workflow.defn(name="LLMCallProbe")
class LLMCallProbe:
    """Just enough workflow to watch Temporal retry the real activity."""

    @workflow.run
    async def run(self, req: LLMRequest) -> LLMResponse:
        return await workflow.execute_activity(
            LLM_CALL,
            req,
            result_type=LLMResponse,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=3),
        )


async def _run_probe(client, server, http, req: LLMRequest):
    queue = f"llm-probe-{uuid.uuid4()}"
    activities = LLMActivities(settings_for(server), http)
    async with Worker(
        client,
        task_queue=queue,
        workflows=[LLMCallProbe],
        activities=[activities.call],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        return await client.execute_workflow(LLMCallProbe.run, req, id=queue, task_queue=queue)


async def test_temporal_retries_a_429_after_its_retry_after(client, server, http):
    server.set_script(
        {
            "rules": [
                {"times": 1, "reply": {"fault": {"status": 429, "retry_after": "2", "message": "rate limited"}}},
                {"reply": {"content": "Sunny."}},
            ]
        }
    )
    started = time.monotonic()
    response = await _run_probe(client, server, http, llm_request(unique_model()))
    assert response.message.content == "Sunny."
    assert len(server.requests) == 2
    # The retry policy alone would retry after 50 ms; the wait comes from Retry-After.
    assert time.monotonic() - started >= 2.0


async def test_temporal_does_not_retry_a_401(client, server, http):
    server.set_script({"default": {"fault": {"status": 401, "message": "invalid x-api-key"}}})
    with pytest.raises(WorkflowFailureError) as err:
        await _run_probe(client, server, http, llm_request(unique_model()))
    cause = err.value.cause.cause
    assert isinstance(cause, ApplicationError) and cause.type == "NonRetryableProviderError"
    assert "invalid x-api-key" in cause.message
    assert len(server.requests) == 1


def _weather_tools() -> ToolActivities:
    registry = ToolRegistry()

    @registry.tool()
    def get_weather(query: CityQuery) -> dict:
        """Current weather for a city."""
        return {"city": query.city}

    return ToolActivities(registry)


async def test_a_request_naming_its_tools_gets_them_resolved_and_returned(server, http):
    server.set_script({"default": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}})
    tools = _weather_tools()
    request = llm_request(unique_model()).model_copy(update={"tools": [], "tool_names": ["get_weather"]})
    response = await run(LLMActivities(settings_for(server), http, describe=tools.describe), request)

    assert [t.name for t in response.tools] == ["get_weather"]
    # The model was offered the resolved schema, and the call was checked against it.
    assert [t["function"]["name"] for t in server.requests[-1].body["tools"]] == ["get_weather"]
    assert not response.violations and response.tool_calls[0].name == "get_weather"


async def test_unknown_or_hostile_tool_names_fail_typed_before_anything_is_sent(server, http):
    tools = _weather_tools()
    sent = len(server.requests)
    for names in (["get_weather", "no_such_tool"], ["x" * 10_000], ["get_weather\u0000; rm -rf /"]):
        request = llm_request(unique_model()).model_copy(update={"tools": [], "tool_names": names})
        with pytest.raises(ApplicationError) as caught:
            await run(LLMActivities(settings_for(server), http, describe=tools.describe), request)
        assert caught.value.type == "InvalidSpecError" and caught.value.non_retryable
        assert any(d["path"].startswith("$.tools[") for d in caught.value.details)
    # A worker that cannot resolve names refuses too, typed.
    with pytest.raises(ApplicationError) as caught:
        await run(
            LLMActivities(settings_for(server), http),
            llm_request(unique_model()).model_copy(update={"tool_names": ["get_weather"]}),
        )
    assert caught.value.non_retryable
    assert len(server.requests) == sent
