"""The pieces every panel of the agentsteps dashboard is made of, so all of them look and filter alike.

``build_dashboard.py`` lists the rows and panels; this module owns the rules
the dashboard test checks: one datasource variable (never a datasource uid),
the selection variables in every selector, ``$__rate_interval`` for every
window, a description and a unit on every panel, thresholds drawn as lines.

Panels, queries, variables and links are Grafana's own typed builders
(``grafana-foundation-sdk``, pinned to the Grafana 11.2 types that compose
runs); this module only decides what every panel shares, and where it goes on
the grid.

Activity-side metrics (prometheus-client, ``telemetry/metrics.py``) carry no
Temporal namespace or task queue label: a worker process serves one of each,
so those series are kept to the workers (job, instance) that poll the selected
namespace and task queue, via ``temporal_num_pollers`` (every worker exports it).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as builders
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")

PanelModel = model.Panel | model.RowPanel
Link = Builder[model.DashboardLink]

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


Steps = tuple[tuple[str, float | None], ...]


def thresholds(*steps: tuple[str, float | None]) -> Steps:
    return steps


def worse_above(warn: float, crit: float) -> Steps:
    return thresholds(("green", None), ("orange", warn), ("red", crit))


def worse_below(crit: float, warn: float) -> Steps:
    return thresholds(("red", None), ("orange", crit), ("green", warn))


INFO = thresholds(("green", None))
"""Volume panels: no level is good or bad in itself."""


def _thresholds(steps: Steps) -> builders.ThresholdsConfig:
    return (
        builders.ThresholdsConfig()
        .mode(model.ThresholdsMode.ABSOLUTE)
        .steps([model.Threshold(color=color, value=value) for color, value in steps])
    )


def target(expr: str, legend: str = "", ref: int = 0) -> prometheus.Dataquery:
    return (
        prometheus.Dataquery()
        .datasource(DATASOURCE)
        .expr(expr)
        .legend_format(legend or "__auto")
        .ref_id(chr(ord("A") + ref))
    )


def panel(
    title: str,
    description: str,
    queries: list[tuple[str, str]] | list[str],
    *,
    unit: str,
    steps: Steps = INFO,
    kind: str = "timeseries",
    width: int = 8,
    height: int = 8,
    links: list[Link] | None = None,
    data_links: list[Link] | None = None,
) -> model.Panel:
    pairs = [(q, "") if isinstance(q, str) else q for q in queries]
    built: timeseries.Panel | stat.Panel
    if kind == "timeseries":
        drawn = common.GraphThresholdsStyleMode.OFF if steps is INFO else common.GraphThresholdsStyleMode.LINE
        built = timeseries.Panel().thresholds_style(common_builders.GraphThresholdsStyleConfig().mode(drawn))
    elif kind == "stat":
        built = (
            stat.Panel()
            .color_scheme(builders.FieldColor().mode(model.FieldColorModeId.THRESHOLDS))
            .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
            .color_mode(common.BigValueColorMode.BACKGROUND)
            .graph_mode(common.BigValueGraphMode.AREA)
        )
    else:
        raise ValueError(f"no panel kind {kind!r}")
    built = (
        built.title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .thresholds(_thresholds(steps))
        .targets([target(e, legend, n) for n, (e, legend) in enumerate(pairs)])
        .grid_pos(model.GridPos(w=width, h=height))
    )
    if links:
        built = built.links(links)
    if data_links:
        built = built.data_links(data_links)
    return built.build()


def row(title: str) -> model.RowPanel:
    return builders.Row(title).collapsed(False).grid_pos(model.GridPos(w=24, h=1)).build()


def temporal_ui_link(title: str, namespace: str, query: str) -> Link:
    """A link to the Temporal UI's list of runs matching a visibility ``query`` (already URL-encoded)."""
    return (
        builders.DashboardLink(title)
        .url(f"${{temporal_ui}}/namespaces/{namespace}/workflows?query={query}")
        .target_blank(True)
    )


def _query_variable(name: str, label: str, query: str, *, multi: bool = True) -> builders.QueryVariable:
    variable = (
        builders.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query({"query": query, "refId": f"{name}-values"})
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
        .include_all(multi)
    )
    if multi:
        variable = variable.all_value(".*").current(model.VariableOption(text="All", value="$__all"))
    return variable


TEMPORAL_UI = "http://localhost:8233"

# Grafana writes a query variable's text as ``definition`` too; the SDK's schema has no field for it.
DEFINITIONS = {
    "job": "label_values(temporal_num_pollers, job)",
    "instance": 'label_values(temporal_num_pollers{job=~"$job"}, instance)',
    "namespace": 'label_values(temporal_num_pollers{job=~"$job"}, namespace)',
    "task_queue": 'label_values(temporal_num_pollers{job=~"$job", namespace=~"$namespace"}, task_queue)',
    "provider": 'label_values(agentsteps_llm_requests_total{job=~"$job"}, provider)',
    "model": 'label_values(agentsteps_llm_requests_total{job=~"$job", provider=~"$provider"}, model)',
    "tool": 'label_values(agentsteps_tool_calls_total{job=~"$job"}, tool)',
    "mcp_server": 'label_values(agentsteps_mcp_server_up{job=~"$job"}, server)',
    "quota": 'label_values(agentsteps_quota_reserved_tokens_total{job=~"$job"}, quota)',
    "tenant": 'label_values(agentsteps_tenant_spend_usd_total{job=~"$job"}, tenant)',
}


def variables() -> list[Builder[model.VariableModel]]:
    d = DEFINITIONS
    return [
        builders.DatasourceVariable("datasource").label("Prometheus").type("prometheus"),
        _query_variable("job", "Job", d["job"]),
        _query_variable("instance", "Worker", d["instance"]),
        # One namespace at a time, so the Temporal UI links can name it.
        _query_variable("namespace", "Namespace", d["namespace"], multi=False),
        _query_variable("task_queue", "Task queue", d["task_queue"]),
        _query_variable("provider", "Provider", d["provider"]),
        _query_variable("model", "Model", d["model"]),
        _query_variable("tool", "Tool", d["tool"]),
        _query_variable("mcp_server", "MCP server", d["mcp_server"]),
        _query_variable("quota", "Quota", d["quota"]),
        _query_variable("tenant", "Tenant", d["tenant"]),
        builders.TextBoxVariable("temporal_ui")
        .label("Temporal UI base URL")
        .default_value(TEMPORAL_UI)
        .current(model.VariableOption(text=TEMPORAL_UI, value=TEMPORAL_UI))
        .description("Where the drill-down links open, e.g. https://temporal.example.com or Temporal Cloud's UI."),
    ]


def layout(panels: list[PanelModel]) -> list[PanelModel]:
    """Ids and positions: panels flow left to right, wrapping at 24 columns; a row starts a new line."""
    x = y = line_height = 0
    for n, p in enumerate(panels, start=1):
        grid = p.grid_pos
        assert grid is not None
        is_row = isinstance(p, model.RowPanel)
        if is_row or x + grid.w > 24:
            x, y, line_height = 0, y + line_height, 0
        grid.x, grid.y = x, y
        p.id_val = n
        x += grid.w
        line_height = max(line_height, grid.h)
        if is_row:
            x, y, line_height = 0, y + grid.h, 0
    return panels


REQUIRES = [
    {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.0.0"},
    {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "2.42.0"},
    {"type": "panel", "id": "stat", "name": "Stat", "version": ""},
    {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
]
