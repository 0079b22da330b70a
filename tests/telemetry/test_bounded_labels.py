"""Hostile label values: random model and tool names, and pipeline contract names, cannot mint unbounded series.

The activities run in Temporal's ActivityEnvironment against the real scripted
model server over HTTP and the real demo tool registry; the workflow-side
metrics go through a real Temporal runtime's meter and ``MetricBuffer``.
"""

from __future__ import annotations

import random
import string
import uuid

import httpx2
import pytest
from prometheus_client import CollectorRegistry
from temporalio.runtime import MetricBuffer, MetricBufferDurationFormat, Runtime, TelemetryConfig
from temporalio.testing import ActivityEnvironment

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.contracts import LLMConfig, Message, ToolCallInput
from agentsteps.contracts.config.settings import PriceTable, ProviderSettings, WorkerSettings
from agentsteps.contracts.llm.request import LLMRequest
from agentsteps.telemetry.labels import MODELS, OTHER, TOOLS, BoundedLabel
from agentsteps.telemetry.metrics import LLM_REQUESTS, REGISTRY, TOOL_CALLS
from agentsteps.telemetry.runtime import TemporalMetricsCollector
from agentsteps.worker import load_registry

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

PRICED = "priced-model-2026-01-01"
HOSTILE = ["", " ", "a\nb", 'x"} 1\nevil_metric{a="', "é" * 10, "x" * 500, "../../etc/passwd", "{{ $labels }}"]


@pytest.fixture(autouse=True)
def restored_labels():
    """These tests fill the admitted sets on purpose; later tests in the process get them back as they were."""
    saved = {bounded: set(bounded._admitted) for bounded in (MODELS, TOOLS)}
    yield
    for bounded, admitted in saved.items():
        bounded._admitted = admitted


def _random_name(rng: random.Random) -> str:
    return "m-" + "".join(rng.choices(string.ascii_lowercase + string.digits, k=12)) + "-2026-01-01"


def _label_values(metric, label: str, **where: str) -> set[str]:
    return {
        s.labels[label]
        for family in REGISTRY.collect()
        if family.name == metric._name
        for s in family.samples
        if all(s.labels.get(k) == v for k, v in where.items())
    }


def _request(model: str) -> LLMRequest:
    return LLMRequest(
        config=LLMConfig(model=model, max_tokens=16, context_window=16_000),
        messages=[Message.user("hi")],
        allowed_model_aliases=[model],
    )


async def _call_models(scripted, models: list[str], *, reject: bool) -> None:
    reply = {"fault": {"status": 400, "message": "no such model"}} if reject else {"content": "ok"}
    scripted.set_script({"rules": [{"match": {}, "reply": reply}]})
    async with httpx2.AsyncClient(timeout=5) as http:
        llm = LLMActivities(
            ProviderSettings(openai_base_url=scripted.url_openai), http, PriceTable(input_per_mtok={PRICED: 1.0})
        )
        env = ActivityEnvironment()
        for model in models:
            try:
                await env.run(llm.call, _request(model))
            except Exception:
                if not reject:
                    raise


async def test_models_a_provider_rejects_are_other_unless_priced(scripted):
    rng = random.Random(1)
    models = [_random_name(rng) for _ in range(150)] + [m for m in HOSTILE if m.strip()]
    await _call_models(scripted, [*models, PRICED], reject=True)
    rejected = _label_values(LLM_REQUESTS, "model", outcome="fatal_error")
    assert not rejected & set(models), "a model the provider rejected became a label"
    assert OTHER in rejected and PRICED in rejected


async def test_models_a_provider_serves_stay_within_the_label_limit(scripted):
    rng = random.Random(2)
    await _call_models(scripted, [_random_name(rng) for _ in range(150)], reject=False)
    served = _label_values(LLM_REQUESTS, "model", outcome="ok")
    assert OTHER in served, "past the limit, served models are other"
    assert len(served - MODELS._known) <= MODELS._limit + 1


async def test_tool_names_the_model_makes_up_are_other():
    tools = ToolActivities(load_registry(WorkerSettings()))
    env = ActivityEnvironment()
    rng = random.Random(3)
    names = ["".join(rng.choices(string.ascii_letters, k=10)) for _ in range(200)] + HOSTILE
    for name in names:
        result = await env.run(
            tools.call,
            ToolCallInput(name=name, arguments="{}", call_id=uuid.uuid4().hex, idempotency_key=uuid.uuid4().hex),
        )
        assert result.is_error
    await env.run(
        tools.call, ToolCallInput(name="get_weather", arguments='{"city": "Paris"}', call_id="c", idempotency_key="k")
    )
    labels = _label_values(TOOL_CALLS, "tool")
    assert not labels & set(names)
    assert {OTHER, "get_weather"} <= labels


def test_workflow_metric_labels_from_specs_are_bounded_on_the_endpoint():
    """500 distinct contract names through Temporal's meter: at most the limit, then other."""
    buffer = MetricBuffer(10_000, MetricBufferDurationFormat.SECONDS)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    collector = TemporalMetricsCollector(buffer)
    registry = CollectorRegistry()
    registry.register(collector)
    counter = runtime.metric_meter.create_counter("agentsteps_reprompts", "Re-prompts.")
    for n in range(500):
        counter.add(1, {"contract": f"step-{n}", "kind": "schema_mismatch", "task_queue": f"q{n % 3}"})
    counter.add(1, {"contract": "a\nb", "kind": "schema_mismatch", "task_queue": "q0"})
    families = {f.name: f for f in collector.collect()}
    samples = families["agentsteps_reprompts"].samples
    contracts = {s.labels["contract"] for s in samples}
    assert len(contracts) <= 101 and OTHER in contracts and "a\nb" not in contracts
    assert sum(s.value for s in samples) == 501, "nothing is lost: over the limit counts under other"
    # Temporal's own labels (the operator's task queues) pass untouched.
    assert {s.labels["task_queue"] for s in samples} == {"q0", "q1", "q2"}


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_is_never_admitted(value):
    assert BoundedLabel(limit=10).admit(value) == OTHER
