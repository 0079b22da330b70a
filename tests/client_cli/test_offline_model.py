"""The offline model of the embedded stack answers what the README teaches, within the engine's contracts."""

from __future__ import annotations

import json
from datetime import date

import httpx
import pytest

from agentsteps.cli.offline import offline_script_text, wants_offline, worker_models
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.monitor import StalledIssue
from agentsteps.scripted_model import Script, ScriptedModelServer
from agentsteps.workflows.monitor.nudges import check_nudge, nudge_prompt

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def offline():
    with ScriptedModelServer(Script.model_validate_json(offline_script_text())) as server:
        yield server


def _ask(server: ScriptedModelServer, messages: list[dict], model: str = "gpt-4o-mini-2024-07-18") -> dict:
    body = {"model": model, "messages": messages}
    return httpx.post(f"{server.url_openai}/chat/completions", json=body, timeout=5).json()["choices"][0]["message"]


def test_the_script_has_no_use_limits_so_two_workers_serving_it_answer_alike():
    assert all(rule.times is None for rule in Script.model_validate_json(offline_script_text()).rules)


def test_a_monitor_nudge_passes_the_nudge_contract_for_any_issue(offline):
    for issue in (
        StalledIssue(id="PROJ-12", assignee="grace", title="Login", updated_at="2026-11-01"),
        StalledIssue(id="OPS-7", assignee="li.wei", title="Disk", updated_at="2026-10-01"),
    ):
        prompt = nudge_prompt(issue, date(2026, 12, 1), 14)
        answer = json.loads(_ask(offline, [{"role": "user", "content": prompt}])["content"])

        assert check_nudge(answer, issue) == [], answer


def test_a_refund_asks_for_the_tool_that_needs_approval(offline):
    message = _ask(offline, [{"role": "user", "content": "Please refund order A-1001"}])
    call = message["tool_calls"][0]["function"]

    assert call["name"] == "refund_order"
    assert json.loads(call["arguments"])["order_id"] == "A-1001"


def test_a_question_it_has_no_rule_for_says_it_is_a_test_double(offline):
    assert "offline scripted model" in _ask(offline, [{"role": "user", "content": "Tell me a joke"}])["content"]


def test_it_serves_only_when_nothing_else_could_answer():
    assert wants_offline(WorkerSettings())
    assert not wants_offline(WorkerSettings(providers=ProviderSettings(openai_api_key="sk-x")))
    assert not wants_offline(WorkerSettings(providers=ProviderSettings(openai_keys={"acme": "OPENAI_KEY_ACME"})))
    assert not wants_offline(WorkerSettings(providers=ProviderSettings(openai_base_url="http://127.0.0.1:11434/v1")))
    with worker_models(WorkerSettings()) as models:
        assert models.offline_digest and "offline scripted model" in models.note
        assert models.settings.providers.openai_base_url.startswith("http://127.0.0.1:")
        assert models.settings.providers.anthropic_base_url.startswith("http://127.0.0.1:")
