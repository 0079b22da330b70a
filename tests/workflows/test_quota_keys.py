"""Several API keys of one provider, end to end: real dev server, real account workflows, real HTTP to the
scripted model. Each key is sent with its own secret, counted by its own quota, and no secret leaves the worker."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from quota_support import start_run, unique
from secret_scan import SecretScan
from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.cli.quotas import summary
from agentsteps.client.quotas import read_account
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import DeploymentConfigError
from agentsteps.contracts.names import STATE_QUERY
from agentsteps.contracts.quotas.config import QuotaSettings
from agentsteps.contracts.quotas.wire import account_id
from agentsteps.contracts.spec import AgentState
from agentsteps.worker import running_worker

MODEL = "scripted-2026-01-01"
USAGE = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
HELD_SECONDS = 50
"""The most the first call on key A is held by the provider (released by ``end_delays`` once the test has
looked): far longer than a whole run on key B takes, even on a loaded machine, so "B finished while A's
second call still waited" does not race the clock."""


def spec(key: str) -> AgentSpec:
    return AgentSpec(
        name="keys",
        tools=[],
        max_steps=2,
        model=LLMConfig(model=MODEL, max_tokens=20, context_window=16_000, api_key=key),
    )


def keyed_settings(
    settings: WorkerSettings, monkeypatch, secrets: dict[str, str], limits: list[dict]
) -> WorkerSettings:
    """Settings declaring one named key per entry of ``secrets`` (its variable set to the secret), and ``limits``."""
    declared = {}
    for name, secret in secrets.items():
        var = f"AGENTSTEPS_TEST_KEY_{uuid.uuid4().hex[:8].upper()}"
        monkeypatch.setenv(var, secret)
        declared[name] = var
    providers = settings.providers.model_copy(update={"openai_keys": declared, "request_timeout_seconds": 60})
    return settings.model_copy(
        update={"providers": providers, "quotas": QuotaSettings.model_validate({"limits": limits})}
    )


async def _until(predicate, timeout: float = 60.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)


async def _settled(client, name: str, timeout: float = 60.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        view = await read_account(client, "quota", name)
        if (view.concurrent == 0 and view.reserved_tokens == 0) or asyncio.get_running_loop().time() > deadline:
            return view
        await asyncio.sleep(0.1)


async def test_two_keys_have_their_own_quotas_and_each_call_is_sent_with_its_own_key(
    client, settings, scripted, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    secret_a, secret_b = "sk-test-a-" + uuid.uuid4().hex, "sk-test-b-" + uuid.uuid4().hex
    quota_a, quota_b = unique("key-a"), unique("key-b")
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"contains": "a-first"},
                    "reply": {"content": "a1", "usage": USAGE, "delay_seconds": HELD_SECONDS},
                }
            ],
            "default": {"content": "ok", "usage": USAGE},
        }
    )
    configured = keyed_settings(
        settings,
        monkeypatch,
        {"acme": secret_a, "globex": secret_b},
        [
            {"name": quota_a, "model": "scripted-*", "api_key": "acme", "concurrent_requests": 1},
            {"name": quota_b, "model": "scripted-*", "api_key": "globex", "concurrent_requests": 1},
        ],
    )
    async with running_worker(client, configured, registry=ToolRegistry()):
        a_first = await start_run(client, configured, spec("acme"), "a-first")
        await _until(lambda: len(scripted.requests) == 1)
        a_second = await start_run(client, configured, spec("acme"), "a-second")
        b_only = await start_run(client, configured, spec("globex"), "b-only")
        b_result = await asyncio.wait_for(b_only.result(), 60)
        # Key A's quota is still full (its first call is held): its second call has not been sent.
        a_waiting = await a_second.query(STATE_QUERY, result_type=AgentState)
        sent_while_a_held = [r.body["messages"][-1]["content"] for r in scripted.requests]
        view_a = await read_account(client, "quota", quota_a)
        scripted.end_delays()
        results = await asyncio.gather(a_first.result(), a_second.result())
        settled_a, settled_b = await _settled(client, quota_a), await _settled(client, quota_b)
        histories = [await h.fetch_history() for h in (a_first, a_second, b_only)]
        for name in (quota_a, quota_b):
            histories.append(await client.get_workflow_handle(account_id("quota", name)).fetch_history())

    assert b_result.status == "completed"
    assert sent_while_a_held == ["a-first", "b-only"], "key B's call never waited on key A's quota"
    assert a_waiting.status == "waiting_for_quota"
    assert (view_a.concurrent, view_a.waiting) == (1, 1)
    assert [r.status for r in results] == ["completed", "completed"]
    by_text = {r.body["messages"][-1]["content"]: r.headers.get("authorization") for r in scripted.requests}
    assert by_text == {
        "a-first": f"Bearer {secret_a}",
        "a-second": f"Bearer {secret_a}",
        "b-only": f"Bearer {secret_b}",
    }
    assert (settled_a.requests_in_window, settled_b.requests_in_window) == (2, 1), "each key counted apart"
    shown = summary(settled_a) + summary(settled_b)
    assert f"quota {quota_a} (openai scripted-*, key acme)" in shown and "key globex" in shown

    scan = SecretScan(secret_a, secret_b).requests(scripted.requests).text("worker logs", caplog.text)
    for i, history in enumerate(histories):
        scan.history(history, f"history {i}")
    scan.text("quota show", shown).text("quota show --json", settled_a.model_dump_json() + settled_b.model_dump_json())
    scan.metrics().text("settings repr", repr(configured))
    if configured.state_dir.exists():
        scan.files("state dir", configured.state_dir)
    scan.assert_clean()


async def test_a_run_naming_a_key_the_worker_lacks_fails_typed_naming_key_and_provider(
    client, settings, scripted, monkeypatch
):
    scripted.set_script({"default": {"content": "never sent", "usage": USAGE}})
    secret = "sk-test-c-" + uuid.uuid4().hex
    configured = keyed_settings(settings, monkeypatch, {"acme": secret}, [])
    async with running_worker(client, configured, registry=ToolRegistry()):
        handle = await start_run(client, configured, spec("initech"), "hello")
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), 60)
        history = await handle.fetch_history()

    text = _failure_text(failure.value)
    assert "NonRetryableProviderError" in text, text
    assert "openai API key 'initech' is not configured on this worker (it has acme, default)" in text, text
    assert scripted.requests == [], "nothing was sent"
    SecretScan(secret).history(history).text("failure", text).assert_clean()


async def test_a_worker_whose_declared_key_is_unset_refuses_to_start_before_starting_anything(
    client, settings, monkeypatch
):
    quota = unique("unset-key")
    configured = keyed_settings(settings, monkeypatch, {}, [])
    providers = configured.providers.model_copy(update={"openai_keys": {"acme": "AGENTSTEPS_TEST_KEY_NEVER_SET"}})
    configured = configured.model_copy(
        update={
            "providers": providers,
            "quotas": QuotaSettings.model_validate(
                {"limits": [{"name": quota, "api_key": "acme", "requests_per_minute": 5}]}
            ),
        }
    )
    monkeypatch.delenv("AGENTSTEPS_TEST_KEY_NEVER_SET", raising=False)

    with pytest.raises(DeploymentConfigError, match="'acme' reads environment variable AGENTSTEPS_TEST_KEY_NEVER_SET"):
        async with running_worker(client, configured, registry=ToolRegistry()):
            pass
    with pytest.raises(RPCError):  # its quota account was never started
        await client.get_workflow_handle(account_id("quota", quota)).describe()


def _failure_text(error: BaseException) -> str:
    parts = []
    node: BaseException | None = error
    while node is not None:
        parts.append(f"{type(node).__name__}: {node}")
        parts.append(str(getattr(node, "type", "") or ""))
        node = node.__cause__
    return "\n".join(parts)


CHEAP = "scripted-mini-2026-01-01"


async def test_a_fallback_model_and_a_tenant_degrade_to_entry_send_with_the_key_they_name(
    client, settings, scripted, monkeypatch
):
    secret_a, secret_b = "sk-test-a-" + uuid.uuid4().hex, "sk-test-b-" + uuid.uuid4().hex
    quota_b, tenant = unique("fallback-b"), unique("soft")
    scripted.set_script(
        {
            "rules": [
                {"match": {"model": CHEAP}, "reply": {"json": {"answer": "cheap"}, "usage": USAGE}},
                {"match": {"model": MODEL}, "reply": {"content": "no json", "usage": USAGE}},
            ]
        }
    )
    configured = keyed_settings(
        settings,
        monkeypatch,
        {"acme": secret_a, "globex": secret_b},
        [
            {"name": quota_b, "model": CHEAP, "api_key": "globex", "requests_per_minute": 100},
        ],
    )
    configured = configured.model_copy(
        update={
            "quotas": configured.quotas.model_copy(
                update={
                    "tenants": [
                        QuotaSettings.model_validate(
                            {
                                "tenants": [
                                    {
                                        "name": tenant,
                                        "budget": {"day": {"tokens_soft": 1, "tokens_hard": 100_000}},
                                        "degrade_to": [{"model": CHEAP, "api_key": "globex"}],
                                    }
                                ]
                            }
                        ).tenants[0]
                    ]
                }
            )
        }
    )
    schema = {"type": "object", "required": ["answer"]}
    falls_back = spec("acme").model_copy(
        update={
            "output_schema": schema,
            "reprompt_budget": 0,
            "fallback_models": [LLMConfig(model=CHEAP, max_tokens=20, context_window=16_000, api_key="globex")],
        }
    )
    async with running_worker(client, configured, registry=ToolRegistry()):
        fallback = await asyncio.wait_for((await start_run(client, configured, falls_back, "fallback")).result(), 60)
        degraded = await asyncio.wait_for(
            (await start_run(client, configured, spec("acme"), "degraded", tenant=tenant)).result(), 60
        )
        view = await _settled(client, quota_b)

    assert fallback.output == {"answer": "cheap"} and degraded.model == CHEAP
    sent = [
        (r.body["messages"][-1]["content"], r.body["model"], r.headers.get("authorization")) for r in scripted.requests
    ]
    assert sent == [
        ("fallback", MODEL, f"Bearer {secret_a}"),
        ("fallback", CHEAP, f"Bearer {secret_b}"),
        ("degraded", CHEAP, f"Bearer {secret_b}"),
    ]
    assert view.requests_in_window == 2, "both calls on key globex were counted by its quota"
