"""``llm.call.plan_first``: a run's first model call asks the worker's quota plan before anything is sent.

Through Temporal's ActivityEnvironment, against the scripted server over real HTTP, with the worker's own
plan lookup (``QuotaPlanActivities.plan_of``) built from a quota table: the worker decides, never the request.
"""

from __future__ import annotations

import uuid

import pytest
from pydantic import SecretStr, ValidationError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.quotas import QuotaPlanActivities
from agentsteps.contracts import LLMConfig, LLMRequest, Message
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.quotas.config import QuotaSettings
from agentsteps.contracts.quotas.plan import PlanFirstAnswer
from agentsteps.scripted_model import ScriptedModelServer

MODEL = "scripted-2026-01-01"


def _activities(server: ScriptedModelServer, http, tmp_path, quotas: dict) -> LLMActivities:
    providers = ProviderSettings(
        openai_base_url=server.url_openai, openai_api_key=SecretStr("sk-plan-first"), request_timeout_seconds=5.0
    )
    settings = WorkerSettings(state_dir=tmp_path, providers=providers, quotas=QuotaSettings.model_validate(quotas))
    return LLMActivities(providers, http, plans=QuotaPlanActivities(settings).plan_of)


def _request(tenant: str | None) -> LLMRequest:
    return LLMRequest(
        config=LLMConfig(model=MODEL, max_tokens=20, context_window=8192),
        messages=[Message.system("Be brief."), Message.user("hello")],
        tenant=tenant,
    )


async def test_a_worker_with_a_plan_for_the_tenant_answers_with_it_and_sends_nothing(server, http, tmp_path):
    server.set_script({"default": {"content": "should never be sent"}})
    server.requests.clear()
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    llm = _activities(server, http, tmp_path, {"tenants": [{"name": tenant, "budget": {"day": {"tokens_hard": 100}}}]})

    answer = await ActivityEnvironment().run(llm.call_plan_first, _request(tenant))

    assert answer.response is None and answer.plan is not None
    assert answer.plan.tenant == tenant and answer.plan.tenant_account is not None
    assert server.requests == [], "nothing reaches the model before the run holds its lease"


async def test_a_worker_without_a_plan_makes_the_call_and_no_tenant_goes_to_the_provider(server, http, tmp_path):
    server.set_script({"default": {"content": "hi"}})
    server.requests.clear()
    llm = _activities(server, http, tmp_path, {})

    answer = await ActivityEnvironment().run(llm.call_plan_first, _request("someone"))

    assert answer.plan is None and answer.response is not None
    assert answer.response.message.content == "hi" and answer.response.violations == []
    assert len(server.requests) == 1 and "tenant" not in server.requests[0].body


@pytest.mark.parametrize("tenant", ["../etc", "", "x" * 65, "tenant with spaces", "é"])
async def test_a_hostile_tenant_is_refused_typed_before_anything_is_sent(server, http, tmp_path, tenant):
    server.set_script({"default": {"content": "should never be sent"}})
    server.requests.clear()
    llm = _activities(server, http, tmp_path, {})

    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(llm.call_plan_first, _request(tenant))

    assert refused.value.type == "QuotaConfigError" and refused.value.non_retryable
    assert server.requests == []


def test_an_answer_carries_the_call_or_the_plan_never_both_nor_neither():
    with pytest.raises(ValidationError):
        PlanFirstAnswer()
    with pytest.raises(ValidationError):
        PlanFirstAnswer.model_validate({"response": {"message": {"role": "assistant", "content": "x"}}, "plan": {}})
