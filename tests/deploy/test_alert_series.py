"""The alert rules and their promtool tests use only series a real worker exports, with its bucket layout.

A real worker (``worker.running_worker`` on a metered client) runs a workload
that moves every family the alerts read: completed and failed runs, tool calls,
a code-mode program, a broken workflow task, a failed RPC, failing long
polls, and runs evicted from a one-entry cache (misses, rebuilds). Its ``/metrics`` is scraped over HTTP, then:

- every metric ``alerts.yml`` queries is in the scrape, and every label it
  matches or groups by is one that metric carries;
- every input series of ``alerts_test.yml`` names a scraped metric with exactly
  the label names a scraped series of it has (``job`` and ``instance`` are
  Prometheus's), and every histogram there lists exactly the exported buckets.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from prometheus_client.parser import text_string_to_metric_families
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agent_support import MODEL, make_spec, weather_then_answer
    from quota_support import QUOTA_SCRIPT, quota_table, run_quota_burst
    from temporalio.client import Client, WorkflowFailureError
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.service import RPCError
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from agentsteps.contracts import AgentInput
    from agentsteps.contracts.config.settings import PriceTable
    from agentsteps.contracts.names import AGENT_WORKFLOW
    from agentsteps.telemetry.runtime import build_runtime
    from agentsteps.telemetry.server import start_metrics_server
    from agentsteps.worker import RunAwareRunner, running_worker

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMETHEUS_LABELS = {"job", "instance"}
ONLY_PROMETHEUS = {"up"}
CONFIGURED_ONLY = {"agentsteps_mcp_server_up": ("server",)}
"""Metrics a worker exports only for what its operator configured (one series per MCP server), which
this workload has none of: their label names are checked against the metric's definition instead,
once telemetry defines it (the MCP-fleet change adds it)."""


@workflow.defn(name="AlertSeriesBrokenWorkflow", sandboxed=False)
class BrokenWorkflow:
    @workflow.run
    async def run(self) -> None:
        raise RuntimeError("bug in workflow code (injected by the alert series test)")


@workflow.defn(name="AlertSeriesCacheChurnWorkflow", sandboxed=False)
class CacheChurnWorkflow:
    """A few timers: three at once on a one-entry cache come back as sticky-cache misses, each a rebuild."""

    @workflow.run
    async def run(self) -> None:
        for _ in range(3):
            await workflow.sleep(0.2)


async def _churn_cache(client: Client, queue: str) -> None:
    runner = RunAwareRunner(UnsandboxedWorkflowRunner())  # the engine's runner, which times rebuilds
    async with Worker(
        client,
        task_queue=queue,
        workflows=[CacheChurnWorkflow],
        max_cached_workflows=1,
        unsandboxed_workflow_runner=runner,
    ):
        await asyncio.gather(
            *(client.execute_workflow(CacheChurnWorkflow.run, id=f"{queue}-{n}", task_queue=queue) for n in range(3))
        )


@pytest_asyncio.fixture(scope="module")
async def scrape(temporal_env, tmp_path_factory) -> dict[str, list[dict[str, str]]]:
    """Sample name -> the label sets of its samples (empty values dropped, as Prometheus drops them)."""
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        data_converter=pydantic_data_converter,
        runtime=build_runtime(),
    )
    from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
    from agentsteps.scripted_model import ScriptedModelServer

    server = start_metrics_server(0, host="127.0.0.1")
    workdir = tmp_path_factory.mktemp("alert-series")
    try:
        with ScriptedModelServer({"rules": []}) as scripted:
            settings = WorkerSettings(
                state_dir=workdir / "state",
                task_queue=f"alerts-{uuid.uuid4().hex[:8]}",
                providers=ProviderSettings(openai_base_url=scripted.url_openai, request_timeout_seconds=5),
                prices=PriceTable(input_per_mtok={MODEL: 2.5}, output_per_mtok={MODEL: 10.0}),
                quotas=quota_table(),
            )
            broken_queue = settings.task_queue + "-broken"
            async with (
                running_worker(client, settings),
                Worker(client, task_queue=broken_queue, workflows=[BrokenWorkflow]),
            ):
                broken = await client.start_workflow(BrokenWorkflow.run, id=broken_queue, task_queue=broken_queue)
                await _workload(client, settings, scripted)
                # A long poll the server refuses (a task queue name over its limit).
                async with Worker(client, task_queue="q" * 3000, workflows=[BrokenWorkflow]):
                    await asyncio.sleep(2)
                await broken.terminate("alert series test done")
        body = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    finally:
        server.stop()
    samples: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append({k: v for k, v in sample.labels.items() if v != ""})
    return samples


async def _workload(client: Client, settings, scripted) -> None:
    task_queue = settings.task_queue

    async def run(script: dict, **overrides) -> None:
        scripted.set_script(script)
        await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(**overrides), input="go"),
            id=f"alerts-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )

    await run(weather_then_answer())
    scripted.set_script(QUOTA_SCRIPT)
    await run_quota_burst(client, settings)
    await run(
        {"replies": [{"content": "```python\nw = await get_weather(city='Paris')\nw['conditions']\n```"}]},
        mode="code",
        tools=["get_weather"],
    )
    with pytest.raises(WorkflowFailureError):
        await run({"replies": [{"fault": {"status": 400, "message": "bad request"}}]}, tools=[])
    with pytest.raises(RPCError):
        await client.get_workflow_handle(f"no-such-run-{uuid.uuid4().hex[:6]}").describe()
    await _churn_cache(client, f"{task_queue}-churn")


# --- what the rules and their tests use -----------------------------------------

_SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def test_series(path: Path = PROMETHEUS_DIR / "alerts_test.yml") -> list[tuple[str, dict[str, str]]]:
    out = []
    for test in yaml.safe_load(path.read_text())["tests"]:
        for entry in test["input_series"]:
            found = _SERIES.match(entry["series"].strip())
            assert found, entry["series"]
            out.append((found.group(1), dict(_LABEL.findall(found.group(2)))))
    return out


test_series.__test__ = False  # a helper, not a test


def rule_exprs() -> list[tuple[str, str]]:
    groups = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"]
    return [(rule["alert"], rule["expr"]) for group in groups for rule in group["rules"]]


def _metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b((?:agentsteps|temporal)_[a-z0-9_]+)\b", expr))
    return names | ({"up"} if re.search(r"\bup\s*\{", expr) else set())


def _pending(name: str) -> bool:
    """True for a configured-only metric, after checking its labels against its definition when it has one."""
    base = re.sub(r"_(bucket|count|sum|total)$", "", name)
    if base not in CONFIGURED_ONLY:
        return False
    from agentsteps.telemetry import metrics

    for obj in vars(metrics).values():
        if getattr(obj, "_name", None) == base:
            assert tuple(obj._labelnames) == CONFIGURED_ONLY[base], f"{base} has labels {obj._labelnames}"
    return True


def test_every_input_series_of_the_promtool_tests_is_a_series_the_worker_exports(scrape):
    for name, labels in test_series():
        wanted = set(labels) - PROMETHEUS_LABELS
        if name in ONLY_PROMETHEUS:
            continue
        if _pending(name):
            assert wanted == set(CONFIGURED_ONLY[name]), f"{name}{sorted(wanted)}"
            continue
        assert name in scrape, f"{name} is not on a real worker's /metrics"
        shapes = {frozenset(s) for s in scrape[name]}
        assert frozenset(wanted) in shapes, f"{name}{sorted(wanted)}: the worker exports {sorted(map(sorted, shapes))}"


def test_every_histogram_in_the_promtool_tests_has_exactly_the_exported_buckets(scrape):
    tested: dict[tuple[str, frozenset], set[float]] = {}
    for name, labels in test_series():
        if name.endswith("_bucket") and not _pending(name):
            key = (name, frozenset((k, v) for k, v in labels.items() if k != "le"))
            tested.setdefault(key, set()).add(float(labels["le"]))
    assert tested, "the promtool tests hold no histogram"
    for (name, _), bounds in tested.items():
        exported = {float(s["le"]) for s in scrape[name]}
        assert bounds == exported, f"{name}: tests use {sorted(bounds)}, the worker exports {sorted(exported)}"


@pytest.mark.parametrize("alert, expr", rule_exprs(), ids=[a for a, _ in rule_exprs()])
def test_every_metric_and_label_an_alert_reads_is_exported(scrape, alert, expr):
    names = _metric_names(expr)
    assert names, expr
    carried: set[str] = {"le"} | PROMETHEUS_LABELS
    for name in names:
        if name in ONLY_PROMETHEUS or _pending(name):
            carried |= {"job", "instance", "server"}
            continue
        sample = name + "_bucket" if f"{name}_bucket" in scrape else name
        assert sample in scrape, f"{alert}: {name} is not on a real worker's /metrics"
        carried |= {label for s in scrape[sample] for label in s}
    used = set(re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)\s*\"", expr))
    for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
        used |= {g.strip() for g in group.split(",") if g.strip()}
    assert used <= carried, f"{alert}: labels {sorted(used - carried)} are on no series it reads"
