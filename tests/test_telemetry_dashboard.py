"""The Grafana dashboard and the alert rules, proven against a real Prometheus that scraped a real worker.

The module fixture starts the worker (``worker.running_worker`` on a client
whose Runtime comes from ``telemetry.runtime.build_runtime``) with the
``/metrics`` server, and a real Prometheus (Debian's package; ``.ci/run``
installs it) using deploy/prometheus/prometheus.yml and alerts.yml, with only
the target, a 1 s interval and a temporary storage directory changed. It then
runs agent workflows twice over, with injected violations, a degradation to
the fallback model, failing tool calls, a provider 500 and a broken workflow
task, so that every counter moves between scrapes. Every dashboard query is
evaluated through ``/api/v1/query`` and must return a series with a finite
value.

Alert expressions end in ``<op> <threshold>``. A healthy test workload cannot
make them fire (one is "the worker is down"), so here each whole expression
must be accepted and loaded healthy by this Prometheus; tests/test_alert_series.py
proves every metric, label and bucket they read is on a real worker's
``/metrics``, and ``alerts_test.yml`` (promtool, see test_deploy_promtool.py)
proves when each one fires and when it stays quiet.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import re
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml
from temporalio import workflow

from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.demos.monitor import demo_monitor_tick

with workflow.unsafe.imports_passed_through():
    import httpx
    import pytest_asyncio
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    from agentsteps.contracts import AgentInput, LLMConfig
    from agentsteps.contracts.config.settings import PriceTable, ProviderSettings, WorkerSettings
    from agentsteps.scripted_model import ScriptedModelServer
    from agentsteps.telemetry.metrics import REGISTRY
    from agentsteps.telemetry.runtime import TEMPORAL_WORKER_METRICS, build_runtime
    from agentsteps.telemetry.server import start_metrics_server
    from agentsteps.telemetry.workflow_metrics import WORKFLOW_METRICS
    from agentsteps.client.sessions import (
        close_session,
        continue_session,
        decide_approval,
        pending_approvals,
        send_turn,
    )
    from agentsteps.contracts.session import SessionConfig
    from agentsteps.worker import DEMO_TOOL_FACTORIES, running_worker

    from agent_support import FALLBACK_MODEL, MODEL, make_spec, weather_then_answer

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "agentsteps.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
SCRAPE_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"


_METRIC_NAME = re.compile(r"\b(agentsteps_[a-z0-9_]+|temporal_[a-z0-9_]+|up)\b")
_SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def base_name(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def metrics_in(expr: str) -> set[str]:
    return {base_name(m) for m in _METRIC_NAME.findall(expr)}


def dashboard_queries() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [
        (f"{p['title']} [{t['refId']}]", t["expr"])
        for p in panels
        if p["type"] != "row"
        for t in p["targets"]
    ]


def alert_rules() -> list[tuple[str, str, str]]:
    """(alert, full expression, the query left of its threshold comparison)."""
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    out = []
    for group in groups:
        for rule in group["rules"]:
            expr = " ".join(rule["expr"].split())
            found = re.fullmatch(r"(.+?)\s*(?:>|<|==|!=|>=|<=)\s*[0-9.e+]+", expr)
            assert found, f"{rule['alert']}: expression is not '<query> <op> <threshold>'"
            out.append((rule["alert"], expr, found.group(1)))
    return out


def defined_metrics() -> set[str]:
    """Every metric telemetry/ defines, by base name."""
    names = {family.name for family in REGISTRY.collect() if family.name.startswith("agentsteps_")}
    names |= {m.name for m in WORKFLOW_METRICS}
    names |= {base_name(n) for n in TEMPORAL_WORKER_METRICS}
    return names


# --- completeness: dashboard <-> telemetry ---------------------------------------


# Defined by the operations change (i15-ops) and exported; the dashboard shows it once its panel lands.
NOT_ON_THE_DASHBOARD_YET = {"agentsteps_worker_slots"}


def test_every_metric_defined_in_telemetry_is_on_the_dashboard():
    on_dashboard = set().union(*(metrics_in(expr) for _, expr in dashboard_queries()))
    assert defined_metrics() - on_dashboard - NOT_ON_THE_DASHBOARD_YET == set()


def test_every_metric_the_dashboard_and_alerts_query_is_defined_in_telemetry():
    # The alerts' metrics are checked against a real scrape instead (tests/test_alert_series.py).
    queried = set().union(*(metrics_in(expr) for _, expr in dashboard_queries()))
    assert queried - defined_metrics() - {"up"} == set()


def test_dashboard_has_the_panels_operators_asked_for():
    titles = {title.split(" [")[0] for title, _ in dashboard_queries()}
    for expected in (
        "Tokens per second by model", "Estimated cost per hour by model (USD)",
        "Contract-failure rate (violations / checks)", "Violations by contract and kind", "Tool success rate",
        "LLM request latency p50 / p95 / p99", "Step latency p50 / p95 / p99",
        "Run end-to-end latency p50 / p95 / p99", "Degradations by reason", "Re-prompts by contract and kind",
        "Programs by outcome", "Stalled tickets", "Task slots used / available", "Schedule-to-start latency p95",
        "Workflow task failures", "Activity failures",
    ):
        assert expected in titles


# --- the real Prometheus ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prometheus_binary() -> str:
    import os

    found = shutil.which("prometheus")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("prometheus is not installed; .ci/run installs Debian's prometheus package")
    pytest.skip("prometheus not installed (apt-get install prometheus); CI fails instead of skipping")


class Prometheus:
    def __init__(self, target: str, workdir: Path) -> None:
        config = yaml.safe_load(SCRAPE_CONFIG.read_text())
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(ALERTS)]
        config["scrape_configs"][0]["static_configs"] = [{"targets": [target]}]
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                _prometheus_binary(),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "prometheus exited; see prometheus.log"
            try:
                if self.http.get("/-/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus never became ready")

    def query(self, expr: str) -> list[dict]:
        body = self.http.get("/api/v1/query", params={"query": expr}).json()
        assert body["status"] == "success", f"{expr}: {body.get('error')}"
        return body["data"]["result"]

    def wait_for(self, expr: str, predicate, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result and predicate(float(result[0]["value"][1])):
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting on {expr}: {self.query(expr)}")

    def stop(self) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


# Unsandboxed: the sandbox would re-import this whole test module for a one-line workflow.
@workflow.defn(name="TelemetryBrokenWorkflow", sandboxed=False)
class BrokenWorkflow:
    """Raises a plain exception: Temporal fails the workflow task and retries it until terminated."""

    @workflow.run
    async def run(self) -> None:
        raise RuntimeError("bug in workflow code (injected by the dashboard test)")


OUTPUT_SCHEMA = {
    "type": "object",
    "required": ["warmest_city"],
    "properties": {"warmest_city": {"type": "string", "enum": ["Paris", "Tokyo"]}},
    "additionalProperties": False,
}
FALLBACK = LLMConfig(model=FALLBACK_MODEL, max_tokens=256, context_window=16_000)

# (script, spec overrides, input): each run moves different metrics.
WORKLOAD = [
    # Clean tool-using run.
    (weather_then_answer(), {}, "weather please"),
    # A tool call that fails (unknown city), then a final answer.
    ({"rules": [
        {"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Atlantis"}}]}},
        {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "No station there."}},
    ]}, {}, "weather in Atlantis"),
    # A postcondition violation, a re-prompt with it, then a valid answer.
    ({"rules": [
        {"match": {"role": "user"}, "times": 1, "reply": {"content": "Tokyo, obviously"}},
        {"match": {"any_contains": "broke the response contract"}, "reply": {"json": {"warmest_city": "Tokyo"}}},
    ]}, {"output_schema": OUTPUT_SCHEMA}, "which city is warmest?"),
    # The primary model keeps failing its contract: degrade to the fallback model.
    ({"rules": [
        {"match": {"model": FALLBACK_MODEL}, "reply": {"json": {"warmest_city": "Paris"}}},
        {"match": {}, "reply": {"content": "no json"}},
    ]}, {"output_schema": OUTPUT_SCHEMA, "reprompt_budget": 0, "fallback_models": [FALLBACK]}, "which city?"),
    # A provider 500 once: the llm.call activity fails and Temporal retries it.
    ({"rules": [
        {"match": {}, "times": 1, "reply": {"fault": {"status": 500, "message": "upstream exploded"}}},
        {"match": {}, "reply": {"content": "All good."}},
    ]}, {}, "hello"),
    # Code mode: the model writes a program whose tool calls are activities.
    ({"replies": [{"content": "```python\nw = await get_weather(city='Paris')\nw['conditions']\n```"}]},
     {"mode": "code", "tools": ["get_weather"]}, "conditions in Paris?"),
]


SESSION_FILLER = "the quick brown fox jumps over the lazy dog " * 8
SESSION_SCRIPT = {
    "rules": [
        {"match": {"contains": "refund A-17"}, "reply": {"tool_calls": [
            {"name": "refund", "arguments": {"order": "A-17", "amount": 40.0}}]}},
        {"match": {"tool_result_for": "refund"}, "reply": {"content": "Refunded."}},
    ],
    "default": {"content": "noted"},
}


async def _run_session_workload(client: Client, settings: WorkerSettings, scripted: ScriptedModelServer) -> None:
    """One session: an approved tool call, turns past a small window (truncated), continue-as-new, close."""
    scripted.set_script(SESSION_SCRIPT)
    sid = f"dash-session-{uuid.uuid4().hex[:8]}"
    spec = make_spec(
        tools=["refund"], model=LLMConfig(model=MODEL, max_tokens=64, context_window=900), context_policy="truncate"
    )
    config = SessionConfig(continue_after_events=100)
    first = asyncio.ensure_future(
        send_turn(client, spec, "refund A-17", session_id=sid, task_queue=settings.task_queue, config=config)
    )
    for _ in range(400):
        try:
            pending = await pending_approvals(client, sid)
        except Exception:  # the session is not started yet
            pending = []
        if pending:
            break
        await asyncio.sleep(0.05)
    await decide_approval(client, sid, pending[0].approval_id, approve=True, approver="dashboard")
    await first
    for n in range(12):
        await continue_session(client, sid, f"note {n}: {SESSION_FILLER}")
    await close_session(client, sid, "dashboard test")


async def _run_workload(client: Client, settings: WorkerSettings, scripted: ScriptedModelServer) -> None:
    # One stalled-ticket monitor tick against a fresh tracker feeds the monitor panels.
    await demo_monitor_tick(client, settings, out=io.StringIO(), issues=60)
    await _run_session_workload(client, settings, scripted)
    for script, overrides, text in WORKLOAD:
        scripted.set_script(script)
        await client.execute_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(**overrides), input=text),
            id=f"dash-{uuid.uuid4().hex[:10]}",
            task_queue=settings.task_queue,
        )


def _total(name: str) -> float:
    return sum(s.value for f in REGISTRY.collect() for s in f.samples if s.name == name)


@pytest_asyncio.fixture(scope="module")
async def scraped(temporal_env, tmp_path_factory):
    """A Prometheus that has scraped a worker through two waves of the workload."""
    workdir = tmp_path_factory.mktemp("prometheus")
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        data_converter=pydantic_data_converter,
        runtime=build_runtime(),
    )
    server = start_metrics_server(0, host="127.0.0.1")
    prometheus = Prometheus(f"127.0.0.1:{server.port}", workdir)
    try:
        prometheus.wait_ready()
        with ScriptedModelServer({"rules": []}) as scripted:
            settings = WorkerSettings(
                state_dir=workdir / "state",
                task_queue=f"dash-{uuid.uuid4().hex[:8]}",
                providers=ProviderSettings(
                    openai_base_url=scripted.url_openai,
                    anthropic_base_url=scripted.url_anthropic,
                    request_timeout_seconds=5,
                ),
                # The demo tools, plus one that requires approval (for the session panels).
                tool_factories=[*DEMO_TOOL_FACTORIES, "approval_support:approval_factory"],
                prices=PriceTable(
                    input_per_mtok={MODEL: 2.5, FALLBACK_MODEL: 0.15},
                    output_per_mtok={MODEL: 10.0, FALLBACK_MODEL: 0.6},
                ),
            )
            broken_queue = settings.task_queue + "-broken"
            async with running_worker(client, settings), Worker(
                client, task_queue=broken_queue, workflows=[BrokenWorkflow]
            ):
                broken = await client.start_workflow(BrokenWorkflow.run, id=broken_queue, task_queue=broken_queue)
                # Wave 1 creates every series; Prometheus must see them before wave 2 moves them,
                # or rate() has nothing to compare against.
                await _run_workload(client, settings, scripted)
                prometheus.wait_for('sum(up{job="agentsteps-worker"})', lambda v: v == 1)
                runs = _total("agentsteps_agent_runs_total")
                prometheus.wait_for("sum(agentsteps_agent_runs_total)", lambda v: v >= runs)
                await _run_workload(client, settings, scripted)
                await broken.terminate("dashboard test done")
                runs = _total("agentsteps_agent_runs_total")
                failed_tasks = _total("temporal_workflow_task_execution_failed_total")
            prometheus.wait_for("sum(agentsteps_agent_runs_total)", lambda v: v >= runs)
            prometheus.wait_for("sum(temporal_workflow_task_execution_failed_total)", lambda v: v >= failed_tasks)
        yield prometheus
    finally:
        prometheus.stop()
        server.stop()


def _finite(result: list[dict]) -> list[float]:
    return [float(r["value"][1]) for r in result if math.isfinite(float(r["value"][1]))]


@pytest.mark.parametrize(
    "expr",
    [pytest.param(expr, id=title) for title, expr in dashboard_queries()],
)
def test_dashboard_query_returns_data_from_the_scraped_worker(scraped, expr):
    result = scraped.query(expr)
    assert _finite(result), f"no finite data for {expr}: {result}"


@pytest.mark.parametrize("alert, expr, query", [pytest.param(*a, id=a[0]) for a in alert_rules()])
def test_alert_expression_evaluates_against_the_scraped_worker(scraped, alert, expr, query):
    scraped.query(expr)  # the full expression, threshold included, is valid here


def test_prometheus_loaded_every_alert_rule_healthy(scraped):
    groups = scraped.http.get("/api/v1/rules").json()["data"]["groups"]
    rules = {r["name"]: r for g in groups for r in g["rules"]}
    assert set(rules) == {a for a, _, _ in alert_rules()}
    assert {r["health"] for r in rules.values()} == {"ok"}


def test_docs_list_every_metric_with_its_type_and_labels():
    from agentsteps.telemetry import metrics

    doc = (ROOT / "docs" / "metrics.md").read_text()
    rows = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^\| `([a-z_]+)` \| (\w+) \| ([^|]*) \|", doc, re.M)
    }
    documented = {base_name(name): value for name, value in rows.items()}
    for obj in vars(metrics).values():
        if hasattr(obj, "_labelnames") and hasattr(obj, "_type"):
            kind, labels = documented[obj._name]
            assert kind == obj._type, obj._name
            for label in obj._labelnames:
                assert label in labels, (obj._name, label)
    for metric in WORKFLOW_METRICS:
        kind, labels = documented[metric.name]
        assert kind == metric.kind and all(label in labels for label in metric.labels), metric.name
    assert {base_name(n) for n in TEMPORAL_WORKER_METRICS} <= set(documented)
