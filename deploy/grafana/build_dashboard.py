"""Builds deploy/grafana/dashboards/agentsteps.json: run it after changing a panel, and commit both.

    .venv/bin/python deploy/grafana/build_dashboard.py

The golden signals and error ratios are here; the other rows are in
dashboard_rows.py, and the rules every panel follows in dashboard_kit.py.
tests/deploy/test_dashboard_rules.py fails while the committed JSON differs from what
this writes; tests/deploy/test_telemetry_dashboard.py evaluates every query against a
real Prometheus that scraped a real worker.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_kit import (  # noqa: E402
    DEFINITIONS,
    LLM,
    REQUIRES,
    TOOL,
    WORKER,
    PanelModel,
    layout,
    panel,
    quantile,
    rate,
    ratio,
    row,
    temporal_ui_link,
    value,
    variables,
    worse_above,
    worse_below,
)
from dashboard_rows import (  # noqa: E402
    code_and_monitor,
    contracts,
    drill_down,
    llm,
    mcp,
    quotas_and_budgets,
    runs,
    sessions,
    temporal_health,
    tools,
    worker_processes,
)
from grafana_foundation_sdk.builders.dashboard import Dashboard  # noqa: E402
from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: E402
from grafana_foundation_sdk.models.dashboard import DashboardCursorSync  # noqa: E402

OUT = Path(__file__).resolve().parent / "dashboards" / "agentsteps.json"
UID = "agentsteps-oncall"

LLM_ERRORS = 'outcome=~"retryable_error|fatal_error"'
RUN_FAILED = 'outcome="failed"'
# Temporal UI visibility queries, URL-encoded.
FAILED_AGENT_RUNS = "WorkflowType%3D%22AgentWorkflow%22%20AND%20ExecutionStatus%3D%22Failed%22"


def golden() -> list[PanelModel]:
    all_runs, failed_runs = rate("agentsteps_agent_runs_total"), rate("agentsteps_agent_runs_total", RUN_FAILED)
    llm_calls, llm_errors = (
        rate("agentsteps_llm_requests_total", LLM, temporal=False),
        rate("agentsteps_llm_requests_total", LLM, LLM_ERRORS, temporal=False),
    )
    return [
        row("Golden signals"),
        panel(
            "Run rate",
            "Agent runs finished per minute, every outcome.",
            [f"sum({all_runs}) * 60"],
            unit="short",
            kind="stat",
            width=3,
            height=5,
        ),
        panel(
            "Run failure %",
            "Agent runs that ended failed, of all runs finished. The link opens the failed runs in the Temporal UI.",
            [ratio(failed_runs, all_runs, "")],
            unit="percentunit",
            kind="stat",
            steps=worse_above(0.05, 0.2),
            width=3,
            height=5,
            links=[temporal_ui_link("Failed agent runs in the Temporal UI", "${namespace}", FAILED_AGENT_RUNS)],
        ),
        panel(
            "LLM error %",
            "Provider calls that failed (retryable or fatal), of all LLM calls. Contract "
            "violations are not errors here.",
            [ratio(llm_errors, llm_calls, "")],
            unit="percentunit",
            kind="stat",
            steps=worse_above(0.02, 0.1),
            width=3,
            height=5,
        ),
        panel(
            "LLM latency p95",
            "95th percentile of provider request latency, all selected models.",
            [quantile(0.95, rate("agentsteps_llm_request_seconds_bucket", LLM, temporal=False))],
            unit="s",
            kind="stat",
            steps=worse_above(10, 30),
            width=3,
            height=5,
        ),
        panel(
            "Cost per hour",
            "Estimated USD per hour from the worker's price table (a model missing from it costs 0).",
            [f"sum({rate('agentsteps_llm_cost_usd_total', LLM, temporal=False)}) * 3600"],
            unit="currencyUSD",
            kind="stat",
            steps=worse_above(20, 100),
            width=3,
            height=5,
        ),
        panel(
            "Workers and pollers",
            "Worker processes that answer scrapes (up) of all scrape targets, and the "
            "Temporal long polls they hold. 0 up means nothing executes runs.",
            [
                (f"sum(up{{{WORKER}}})", "up"),
                (f"count(up{{{WORKER}}})", "targets"),
                (f"sum({value('temporal_num_pollers')})", "pollers"),
            ],
            unit="short",
            kind="stat",
            steps=worse_below(1, 1),
            width=4,
            height=5,
        ),
        panel(
            "Schedule-to-start p95",
            "How long tasks wait in the task queue before a worker takes them. Rising means too few workers or slots.",
            [
                (quantile(0.95, rate("temporal_workflow_task_schedule_to_start_latency_seconds_bucket")), "workflow"),
                (quantile(0.95, rate("temporal_activity_schedule_to_start_latency_seconds_bucket")), "activity"),
            ],
            unit="s",
            kind="stat",
            steps=worse_above(1, 5),
            width=5,
            height=5,
        ),
    ]


def error_ratios() -> list[PanelModel]:
    all_runs, failed_runs = rate("agentsteps_agent_runs_total"), rate("agentsteps_agent_runs_total", RUN_FAILED)
    calls = rate("agentsteps_tool_calls_total", TOOL, temporal=False)
    return [
        row("Error ratios"),
        panel(
            "LLM error ratio by model",
            "Failed provider calls (retryable or fatal) of all calls, per model.",
            [
                ratio(
                    rate("agentsteps_llm_requests_total", LLM, LLM_ERRORS, temporal=False),
                    rate("agentsteps_llm_requests_total", LLM, temporal=False),
                    "provider, model",
                )
            ],
            unit="percentunit",
            steps=worse_above(0.02, 0.1),
            width=6,
        ),
        panel(
            "Tool error ratio by tool",
            "Failed calls of all calls, per tool: infra_error (the tool or its "
            "server is down) and error (the tool refused the call, often the model's bad arguments).",
            [
                (
                    ratio(
                        rate("agentsteps_tool_calls_total", TOOL, 'outcome="infra_error"', temporal=False),
                        calls,
                        "tool",
                    ),
                    "{{tool}} infra",
                ),
                (
                    ratio(rate("agentsteps_tool_calls_total", TOOL, 'outcome="error"', temporal=False), calls, "tool"),
                    "{{tool}} refused",
                ),
            ],
            unit="percentunit",
            steps=worse_above(0.05, 0.2),
            width=6,
        ),
        panel(
            "Run failure ratio by workflow type",
            "Failed runs of all runs, per workflow type. Click a series for its failed runs in the Temporal UI.",
            [(ratio(failed_runs, all_runs, "namespace, workflow_type"), "{{workflow_type}}")],
            unit="percentunit",
            steps=worse_above(0.05, 0.2),
            data_links=drill_down("Failed"),
            width=6,
        ),
        panel(
            "Failed runs by reason",
            "Failed runs per second by why they failed: budget, contract, provider, "
            "invalid_spec, cancelled, timeout, internal (a bug: page). Click a series for the failed runs.",
            [(f"sum by (namespace, workflow_type, reason) ({failed_runs})", "{{workflow_type}} {{reason}}")],
            unit="ops",
            steps=worse_above(0.01, 0.1),
            data_links=drill_down("Failed"),
            width=6,
        ),
    ]


def build() -> dict[str, Any]:
    panels = layout(
        [
            *golden(),
            *error_ratios(),
            *llm(),
            *contracts(),
            *tools(),
            *mcp(),
            *runs(),
            *code_and_monitor(),
            *temporal_health(),
            *worker_processes(),
            *sessions(),
            *quotas_and_budgets(),
        ]
    )
    built = (
        Dashboard("agentsteps")
        .uid(UID)
        .description(
            "LLM agent steps on Temporal: golden signals first, then error ratios, LLM, contracts, "
            "tools, MCP servers, runs, code mode, monitor, Temporal worker health, worker processes, "
            "sessions, and quotas and budgets."
        )
        .tags(["agentsteps", "temporal", "llm"])
        .timezone("browser")
        .version(2)
        .editable()
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-6h", "now")
        .variables(variables())
        .build()
    )
    built.panels = panels  # laid out by dashboard_kit.layout: the builder's own placement lets a panel overflow
    out: dict[str, Any] = json.loads(JSONEncoder().encode(built))
    for variable in out["templating"]["list"]:
        if variable["name"] in DEFINITIONS:
            variable["definition"] = DEFINITIONS[variable["name"]]
    # What Grafana's "export for sharing externally" adds around the model: no id (importing must not
    # overwrite whichever dashboard has it) and what the dashboard needs installed.
    return {"__inputs": [], "__requires": REQUIRES, "id": None, **out}


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
