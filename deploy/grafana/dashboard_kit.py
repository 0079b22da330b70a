"""The pieces every panel of the agentsteps dashboard is made of, so all of them look and filter alike.

``build_dashboard.py`` lists the rows and panels; this module owns the rules
the dashboard test checks: one datasource variable (never a datasource uid),
the selection variables in every selector, ``$__rate_interval`` for every
window, a description and a unit on every panel, thresholds drawn as lines.

Activity-side metrics (prometheus-client, ``telemetry/metrics.py``) carry no
Temporal namespace or task queue label: a worker process serves one of each,
so those series are kept to the workers (job, instance) that poll the selected
namespace and task queue, via ``temporal_num_pollers`` (every worker exports it).
"""

from __future__ import annotations

from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

WORKER = 'job=~"$job", instance=~"$instance"'
"""Prometheus' own target labels: which scrape job and which worker pods."""
TEMPORAL = WORKER + ', namespace=~"$namespace", task_queue=~"$task_queue"'
"""Temporal SDK and workflow-side metrics carry namespace and task queue."""
LLM = 'provider=~"$provider", model=~"$model"'
TOOL = 'tool=~"$tool"'
RATE = "[$__rate_interval]"

POLLING_WORKERS = f"group by (job, instance) (temporal_num_pollers{{{TEMPORAL}}})"


def sel(*parts: str) -> str:
    return "{" + ", ".join(p for p in parts if p) + "}"


def rate(metric: str, *labels: str, temporal: bool = True) -> str:
    """``rate()`` of a counter (or bucket) restricted to the selected workers, namespace and task queue."""
    if temporal:
        return f"rate({metric}{sel(TEMPORAL, *labels)}{RATE})"
    return f"(rate({metric}{sel(WORKER, *labels)}{RATE}) and on (job, instance) {POLLING_WORKERS})"


def value(metric: str, *labels: str, temporal: bool = True) -> str:
    """A gauge, restricted like :func:`rate`."""
    if temporal:
        return f"{metric}{sel(TEMPORAL, *labels)}"
    return f"({metric}{sel(WORKER, *labels)} and on (job, instance) {POLLING_WORKERS})"


def ratio(part: str, whole: str, by: str) -> str:
    """``part / whole`` by ``by``, 0 (not absent) where ``part`` has no series yet.

    A tool that never failed has no error series, and a tool that never
    succeeded has no ``ok`` series: both must still show a ratio.
    """
    num = f"sum by ({by}) ({part})" if by else f"sum({part})"
    den = f"sum by ({by}) ({whole})" if by else f"sum({whole})"
    return f"({num} or {den} * 0) / {den}"


def quantile(q: float, bucket_rate: str, by: str = "") -> str:
    keys = f"le, {by}" if by else "le"
    return f"histogram_quantile({q}, sum by ({keys}) ({bucket_rate}))"


def thresholds(*steps: tuple[str, float | None]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}


def worse_above(warn: float, crit: float) -> dict[str, Any]:
    return thresholds(("green", None), ("orange", warn), ("red", crit))


def worse_below(crit: float, warn: float) -> dict[str, Any]:
    return thresholds(("red", None), ("orange", crit), ("green", warn))


INFO = thresholds(("green", None))
"""Volume panels: no level is good or bad in itself."""


def target(expr: str, legend: str = "", ref: int = 0) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "expr": expr,
        "legendFormat": legend or "__auto",
        "refId": chr(ord("A") + ref),
    }


def panel(
    title: str,
    description: str,
    queries: list[tuple[str, str]] | list[str],
    *,
    unit: str,
    steps: dict[str, Any] = INFO,
    kind: str = "timeseries",
    width: int = 8,
    height: int = 8,
    links: list[dict[str, Any]] | None = None,
    data_links: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    pairs = [(q, "") if isinstance(q, str) else q for q in queries]
    defaults: dict[str, Any] = {"unit": unit, "thresholds": steps}
    if kind == "timeseries":
        drawn = "off" if steps is INFO else "line"
        defaults["custom"] = {"thresholdsStyle": {"mode": drawn}}
    else:
        defaults["color"] = {"mode": "thresholds"}
    if data_links:
        defaults["links"] = data_links
    out: dict[str, Any] = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "targets": [target(expr, legend, n) for n, (expr, legend) in enumerate(pairs)],
        "gridPos": {"w": width, "h": height},
    }
    if kind == "stat":
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background", "graphMode": "area"}
    if links:
        out["links"] = links
    return out


def row(title: str) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "gridPos": {"w": 24, "h": 1}}


def temporal_ui_link(title: str, namespace: str, query: str) -> dict[str, Any]:
    """A link to the Temporal UI's list of runs matching a visibility ``query`` (already URL-encoded)."""
    return {
        "title": title,
        "url": f"${{temporal_ui}}/namespaces/{namespace}/workflows?query={query}",
        "targetBlank": True,
    }


def _query_variable(name: str, label: str, query: str, *, multi: bool = True) -> dict[str, Any]:
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-values"},
        "refresh": 2,
        "sort": 1,
        "multi": multi,
        "includeAll": multi,
        **({"allValue": ".*", "current": {"text": "All", "value": "$__all"}} if multi else {}),
    }


def variables() -> list[dict[str, Any]]:
    pollers = "temporal_num_pollers"
    return [
        {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus", "refresh": 1},
        _query_variable("job", "Job", f"label_values({pollers}, job)"),
        _query_variable("instance", "Worker", f'label_values({pollers}{{job=~"$job"}}, instance)'),
        # One namespace at a time, so the Temporal UI links can name it.
        _query_variable("namespace", "Namespace", f'label_values({pollers}{{job=~"$job"}}, namespace)', multi=False),
        _query_variable(
            "task_queue", "Task queue",
            f'label_values({pollers}{{job=~"$job", namespace=~"$namespace"}}, task_queue)',
        ),
        _query_variable("provider", "Provider", 'label_values(agentsteps_llm_requests_total{job=~"$job"}, provider)'),
        _query_variable(
            "model", "Model", 'label_values(agentsteps_llm_requests_total{job=~"$job", provider=~"$provider"}, model)'
        ),
        _query_variable("tool", "Tool", 'label_values(agentsteps_tool_calls_total{job=~"$job"}, tool)'),
        _query_variable("mcp_server", "MCP server", 'label_values(agentsteps_mcp_server_up{job=~"$job"}, server)'),
        {
            "type": "textbox",
            "name": "temporal_ui",
            "label": "Temporal UI base URL",
            "query": "http://localhost:8233",
            "current": {"text": "http://localhost:8233", "value": "http://localhost:8233"},
            "description": "Where the drill-down links open, e.g. https://temporal.example.com or Temporal Cloud's UI.",
        },
    ]


def layout(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ids and positions: panels flow left to right, wrapping at 24 columns; a row starts a new line."""
    x = y = line_height = 0
    for n, p in enumerate(panels, start=1):
        grid = p["gridPos"]
        if p["type"] == "row" or x + grid["w"] > 24:
            x, y, line_height = 0, y + line_height, 0
        grid["x"], grid["y"] = x, y
        p["id"] = n
        x += grid["w"]
        line_height = max(line_height, grid["h"])
        if p["type"] == "row":
            x, y, line_height = 0, y + grid["h"], 0
    return panels


REQUIRES = [
    {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
    {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "2.42.0"},
    {"type": "panel", "id": "stat", "name": "Stat", "version": ""},
    {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
]
