"""The Grafana dashboard follows the rules on-call relies on, checked on the committed JSON.

tests/deploy/test_telemetry_dashboard.py proves every query returns data from a real
Prometheus; these check that the dashboard is the builder's output, reusable
(variables, no datasource uid, ``$__rate_interval``), explained (descriptions,
units, thresholds), ordered (golden signals first), linked into the Temporal UI,
and importable into an existing Grafana.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "agentsteps.json"


def _builder():
    spec = importlib.util.spec_from_file_location("build_dashboard", GRAFANA / "build_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict) -> list[dict]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def exprs(dashboard: dict) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in panels(dashboard) for t in p["targets"]]


def test_the_committed_dashboard_is_what_the_builder_makes():
    builder = _builder()
    assert DASHBOARD.read_text() == builder.render(), "run: .venv/bin/python deploy/grafana/build_dashboard.py"


def _walk(node, path=""):
    if isinstance(node, dict):
        for key, child in node.items():
            yield f"{path}.{key}", key, child
            yield from _walk(child, f"{path}.{key}")
    elif isinstance(node, list):
        for n, child in enumerate(node):
            yield from _walk(child, f"{path}[{n}]")


def test_every_datasource_is_the_variable_and_no_datasource_uid_is_hard_coded(dashboard):
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    datasources = [child for _, key, child in _walk(dashboard) if key == "datasource"]
    assert len(datasources) > len(panels(dashboard))  # panels, targets and query variables
    assert all(d == {"type": "prometheus", "uid": "${datasource}"} for d in datasources), datasources
    uids = [(where, child) for where, key, child in _walk(dashboard) if key == "uid"]
    assert {child for _, child in uids} == {"${datasource}", dashboard["uid"]}
    assert [where for where, _ in uids if _ == dashboard["uid"]] == [".uid"]


_METRIC = re.compile(r"\b((?:agentsteps|temporal|process)_[a-z0-9_]+|up)\b(\{[^}]*\})?")
_WORKFLOW_SIDE = re.compile(
    r"^(temporal_(?!request)|agentsteps_(agent|reprompts|degradations|session|approval|quota|tenant))"
)


def test_every_selector_uses_the_template_variables(dashboard):
    for title, expr in exprs(dashboard):
        for metric, selector in _METRIC.findall(expr):
            assert selector, f"{title}: {metric} without a selector"
            assert 'job=~"$job"' in selector and 'instance=~"$instance"' in selector, (title, metric)
            if _WORKFLOW_SIDE.match(metric):
                assert '"$namespace"' in selector and '"$task_queue"' in selector, (title, metric)
            if metric.startswith("agentsteps_llm_"):
                assert 'provider=~"$provider"' in selector and 'model=~"$model"' in selector, (title, metric)
            if metric.startswith(("agentsteps_tool_", "agentsteps_approvals_requested")):
                assert 'tool=~"$tool"' in selector, (title, metric)
            if metric.startswith("agentsteps_mcp_"):
                assert 'server=~"$mcp_server"' in selector, (title, metric)
            if metric.startswith("agentsteps_quota_"):
                assert 'quota=~"$quota"' in selector, (title, metric)
            if metric.startswith("agentsteps_tenant_"):
                assert 'tenant=~"$tenant"' in selector, (title, metric)
        if set(m for m, _ in _METRIC.findall(expr)) != {"up"}:
            # Activity-side series have no namespace or task queue: kept to the workers that poll them.
            assert '"$namespace"' in expr and '"$task_queue"' in expr, title


def test_every_window_is_the_rate_interval(dashboard):
    for title, expr in exprs(dashboard):
        assert re.findall(r"\[([^\]]*)\]", expr) == ["$__rate_interval"] * expr.count("["), title


def test_every_variable_is_used_and_the_query_ones_read_the_datasource_variable(dashboard):
    everything = json.dumps(dashboard["panels"])
    for variable in dashboard["templating"]["list"]:
        name = variable["name"]
        assert f"${name}" in everything or "${" + name + "}" in everything, name
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == "${datasource}"
    chained = {v["name"]: v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"}
    assert '"$job"' in chained["instance"] and '"$provider"' in chained["model"]


def test_every_panel_has_a_description_a_unit_and_thresholds_where_a_level_means_trouble(dashboard):
    for panel in panels(dashboard):
        defaults = panel["fieldConfig"]["defaults"]
        assert len(panel["description"]) > 20, panel["title"]
        assert defaults["unit"], panel["title"]
        steps = defaults["thresholds"]["steps"]
        if defaults["unit"] in ("percentunit", "s", "currencyUSD"):
            assert len(steps) >= 3, f"{panel['title']}: a ratio, latency or cost needs warn and critical levels"
            if panel["type"] == "timeseries":
                assert defaults["custom"]["thresholdsStyle"]["mode"] == "line", panel["title"]


def test_the_first_row_is_the_golden_signals(dashboard):
    first_row, *rest = dashboard["panels"]
    assert first_row["type"] == "row" and first_row["title"] == "Golden signals"
    golden = []
    for panel in rest:
        if panel["type"] == "row":
            break
        golden.append(panel)
    assert [p["title"] for p in golden] == [
        "Run rate",
        "Run failure %",
        "LLM error %",
        "LLM latency p95",
        "Cost per hour",
        "Workers and pollers",
        "Schedule-to-start p95",
    ]
    assert {p["gridPos"]["y"] for p in golden} == {1}, "one line at the top"
    assert sum(p["gridPos"]["w"] for p in golden) <= 24


def test_the_quotas_and_budgets_row_filters_by_tenant_and_shows_each_quota_and_budget_signal(dashboard):
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["tenant"]["type"] == "query" and variables["tenant"]["multi"] is True
    assert variables["tenant"]["definition"] == 'label_values(agentsteps_tenant_spend_usd_total{job=~"$job"}, tenant)'
    titles = [p["title"] for p in dashboard["panels"]]
    start = titles.index("Quotas and budgets")
    row_panels = {p["title"]: p for p in dashboard["panels"][start + 1 : start + 7]}
    assert list(row_panels) == [
        "Quota utilization",
        "Quota waits and 429s per second",
        "Quota wait p95",
        "Reserved vs actual tokens",
        "Tenant budget used",
        "Tenant spend per hour (USD)",
    ]
    metrics = {
        title: set(re.findall(r"agentsteps_[a-z_]+", json.dumps(p["targets"]))) for title, p in row_panels.items()
    }
    assert "agentsteps_quota_utilization_ratio" in metrics["Quota utilization"]
    assert metrics["Quota waits and 429s per second"] == {
        "agentsteps_quota_waits_total",
        "agentsteps_quota_throttled_total",
    }
    assert metrics["Quota wait p95"] == {"agentsteps_quota_wait_seconds_bucket"}
    assert metrics["Reserved vs actual tokens"] == {
        "agentsteps_quota_reserved_tokens_total",
        "agentsteps_quota_actual_tokens_total",
    }
    assert metrics["Tenant budget used"] == {"agentsteps_tenant_budget_used_ratio"}
    assert metrics["Tenant spend per hour (USD)"] == {"agentsteps_tenant_spend_usd_total"}
    # The budget panel draws the alerts' levels: 80% warns, 100% is the limit.
    steps = row_panels["Tenant budget used"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, 0.8, 1]


def test_drill_down_links_open_the_temporal_ui_filtered_by_workflow_type(dashboard):
    ui = next(v for v in dashboard["templating"]["list"] if v["name"] == "temporal_ui")
    assert ui["type"] == "textbox" and ui["query"].startswith("http")
    by_title = {p["title"]: p for p in panels(dashboard)}
    (failed,) = by_title["Run failure %"]["links"]
    assert failed["url"].startswith("${temporal_ui}/namespaces/${namespace}/workflows?query=")
    assert "WorkflowType%3D%22AgentWorkflow%22" in failed["url"] and "Failed" in failed["url"]
    for title in ("Run failure ratio by workflow type", "Runs by outcome", "Workflow task failures"):
        (link,) = by_title[title]["fieldConfig"]["defaults"]["links"]
        assert link["url"] == (
            "${temporal_ui}/namespaces/${__field.labels.namespace}/workflows?query="
            "WorkflowType%3D%22${__field.labels.workflow_type}%22" + link["url"].split("%22", 2)[2]
        )
        # The series the link reads its labels from keep them.
        assert all("namespace, workflow_type" in t["expr"] for t in by_title[title]["targets"]), title


def test_it_imports_into_an_existing_grafana(dashboard):
    assert dashboard["id"] is None, "an id would overwrite whichever dashboard has it"
    assert dashboard["uid"] == "agentsteps-oncall"
    assert {r["id"] for r in dashboard["__requires"]} >= {"grafana", "prometheus", "timeseries", "stat"}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "agentsteps.yml").read_text())
    assert provider["providers"][0]["folder"] == "agentsteps"
    datasource = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert "uid" not in datasource["datasources"][0], "nothing refers to a datasource uid"


def test_the_kustomization_ships_it_as_a_configmap_the_grafana_sidecar_loads():
    import shutil
    import subprocess

    kustomization = yaml.safe_load((GRAFANA / "kustomization.yaml").read_text())
    assert kustomization["generatorOptions"]["labels"]["grafana_dashboard"] == "1"
    (generator,) = kustomization["configMapGenerator"]
    assert [GRAFANA / f for f in generator["files"]] == [DASHBOARD]
    if shutil.which("kubectl") is None:
        return  # the rendering below needs it; the checks above do not
    rendered = subprocess.run(["kubectl", "kustomize", str(GRAFANA)], capture_output=True, text=True, check=True).stdout
    (configmap,) = list(yaml.safe_load_all(rendered))
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"] == {"agentsteps.json": DASHBOARD.read_text()}
    # kubectl apply keeps a last-applied copy in an annotation, capped at 256 KiB.
    assert len(DASHBOARD.read_bytes()) < 200_000
