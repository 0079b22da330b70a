"""The console's read-only pages over a real dev server: visibility rows, filters, a run's timeline, escaping."""

from __future__ import annotations

import html

import pytest
from agent_support import MODEL, make_spec
from console_support import browser, console, start_run, until
from temporalio.api.enums.v1 import EventType

from agentsteps.client.runs import start_agent_run
from agentsteps.console.present import money
from agentsteps.contracts.config.settings import PriceTable
from agentsteps.contracts.names import SA_MODEL, SA_SPEC, SA_STEPS, SA_TOKENS, SA_VIOLATIONS
from agentsteps.worker import running_worker

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'
WEATHER = {
    "rules": [
        {
            "match": {"role": "user", "contains": "which city"},
            "times": 1,
            "reply": {"content": "not json at all " + HOSTILE},
        },
        {"match": {"any_contains": "broke the response contract"}, "reply": {"json": {"warmest_city": "Tokyo"}}},
        {
            "match": {"role": "user", "contains": "weather"},
            "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        },
        {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "Sunny in Paris. " + HOSTILE}},
    ]
}
CITY_SCHEMA = {"type": "object", "properties": {"warmest_city": {"type": "string"}}, "required": ["warmest_city"]}


async def visible(client, workflow_id: str, name: str):
    async def row():
        async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
            values = {pair.key.name: pair.value for pair in wf.typed_search_attributes}
            return values if name in values else None
        return None

    return await until(row)


def upserts(history) -> int:
    return sum(e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES for e in history.events)


@pytest.mark.parametrize("started_by", ["start_workflow", "start_agent_run"])
async def test_a_finished_run_is_listed_through_visibility_with_its_spec_model_steps_tokens_and_cost(
    client, settings, scripted, started_by
):
    """A completed run's totals come from its result (it pays no upsert for them); its spec and model from
    visibility, set by the client with the start (``start_agent_run``) or by the run's own first upsert."""
    scripted.set_script(WEATHER)
    priced = settings.model_copy(update={"prices": PriceTable(input_per_mtok={MODEL: 1000.0})})
    async with running_worker(client, priced):
        if started_by == "start_agent_run":
            handle = await start_agent_run(
                client,
                make_spec(name="weather-desk", tools=["get_weather"]),
                "weather in Paris",
                task_queue=priced.task_queue,
            )
        else:
            handle = await start_run(
                client, priced.task_queue, "weather in Paris", name="weather-desk", tools=["get_weather"]
            )
        result = await handle.result()
        attrs = await visible(client, handle.id, SA_SPEC)
        assert attrs[SA_SPEC] == "weather-desk" and attrs[SA_MODEL] == MODEL
        # The zeros it started with: the totals are in the result.
        assert attrs[SA_STEPS] == 0 and attrs[SA_TOKENS] == 0 and attrs[SA_VIOLATIONS] == 0
        # The release's TemporalChangeVersion (one release gate covers every branch since 0.2.0); and the run's
        # own start upsert when the client set none.
        assert upserts(await handle.fetch_history()) == (1 if started_by == "start_agent_run" else 2)
        assert result.cost_usd > 0 and len(result.steps) == 2

        async with console(client) as url, browser(url) as web:
            page = (await web.get("/runs", params={"spec": "weather-desk", "kind": "run"})).text
            assert handle.id in page and "weather-desk" in page and MODEL in page
            assert f"{result.usage.total_tokens:,}" in page
            assert money(result.cost_usd) in page and money(0.0) not in page
            # Another spec's filter does not list it; a session filter neither.
            assert handle.id not in (await web.get("/runs", params={"spec": "someone-else"})).text
            assert handle.id not in (await web.get("/runs", params={"kind": "session"})).text
            assert handle.id in (await web.get("/runs", params={"status": "completed", "since": "1h"})).text


async def test_a_runs_timeline_shows_steps_tool_calls_and_how_a_violation_was_handled(client, settings, scripted):
    scripted.set_script(WEATHER)
    async with running_worker(client, settings):
        handle = await start_run(
            client, settings.task_queue, "which city is warmest?", output_schema=CITY_SCHEMA, tools=[]
        )
        await handle.result()
        async with console(
            client, temporal_ui_url="http://ui.example:8233", grafana_url="http://grafana.example"
        ) as url:
            async with browser(url) as web:
                page = (await web.get(f"/runs/{handle.id}")).text
    assert 'id="step-0"' in page and 'id="step-1"' in page
    assert "Broke its contract" in page and "re-prompted" in page
    assert "broke the response contract" in page  # the re-prompt text the model read
    assert "Tokyo" in page and "completed" in page
    assert f"http://ui.example:8233/namespaces/default/workflows/{handle.id}/" in page
    assert "http://grafana.example/d/agentsteps-oncall/agentsteps?" in html.unescape(page)


async def test_model_and_tool_text_is_shown_as_text_never_as_markup(client, settings, scripted):
    scripted.set_script(WEATHER)
    async with running_worker(client, settings):
        handle = await start_run(client, settings.task_queue, "weather in Paris", tools=["get_weather"])
        await handle.result()
        async with console(client) as url, browser(url) as web:
            page = (await web.get(f"/runs/{handle.id}")).text
            headers = (await web.get(f"/runs/{handle.id}")).headers
    assert "<script>window.__pwned" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    # Inline scripts run only with this response's nonce: an injected one would not.
    assert "script-src 'nonce-" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"


async def test_a_bad_filter_or_unknown_run_gets_a_page_that_says_so(client):
    async with console(client) as url, browser(url) as web:
        hostile = await web.get("/runs", params={"spec": "x' OR WorkflowId != '"})
        assert hostile.status_code == 400 and "letters, digits" in hostile.text
        assert (await web.get("/runs", params={"status": "exploded"})).status_code == 400
        assert (await web.get("/runs", params={"page": "%%%not-base64"})).status_code == 400
        missing = await web.get("/runs/no-such-run-anywhere")
        assert missing.status_code == 404 and "No run or session has the id" in missing.text


async def test_the_console_is_a_client_and_names_no_secret(client, settings, scripted):
    """Nothing from the worker's secrets reaches a page, even when the console's settings hold them."""
    from pydantic import SecretStr

    scripted.set_script(WEATHER)
    secret = "sk-console-test-secret-value-123"
    async with running_worker(client, settings):
        handle = await start_run(client, settings.task_queue, "weather in Paris", tools=["get_weather"])
        await handle.result()
    async with console(client, token=SecretStr(secret)) as url, browser(url) as web:
        pages = []
        for path in ("/login", "/approvals", "/runs", f"/runs/{handle.id}"):
            response = await web.get(path, headers={"Authorization": f"Bearer {secret}"})
            assert response.status_code == 200, path
            pages.append(response.text + str(response.headers))
    assert all(secret not in p for p in pages)


async def test_healthz_answers_without_a_token(client):
    from pydantic import SecretStr

    async with console(client, token=SecretStr("t0ken")) as url, browser(url) as web:
        assert (await web.get("/healthz")).text == "ok"
        assert (await web.get("/runs")).status_code == 303  # the pages do need it


async def test_a_failed_runs_page_says_why_it_failed_and_keeps_its_steps(client, settings, scripted):
    scripted.set_script(WEATHER)
    async with running_worker(client, settings):
        handle = await start_run(client, settings.task_queue, "weather in Paris", tools=["get_weather"], max_steps=1)
        try:
            await handle.result()
        except Exception:
            pass
        async with console(client) as url, browser(url) as web:
            page = (await web.get(f"/runs/{handle.id}")).text
            listed = await until(lambda: _text_with(web, "/runs?status=failed", handle.id))
    assert 'id="failure"' in page and "used all 1 steps" in page
    assert 'id="step-0"' in page and "get_weather" in page
    assert listed


async def _text_with(web, path: str, needle: str) -> str | None:
    text = (await web.get(path)).text
    return text if needle in text else None
