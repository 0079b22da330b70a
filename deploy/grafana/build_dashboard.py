"""Builds deploy/grafana/dashboards/agentsteps.json: run it after changing a panel, and commit both.

    .venv/bin/python deploy/grafana/build_dashboard.py

tests/test_telemetry_dashboard.py fails while the committed JSON differs from
what this prints, and evaluates every query against a real Prometheus.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_kit import (  # noqa: E402
    LLM, REQUIRES, TEMPORAL, TOOL, WORKER, INFO, POLLING_WORKERS, layout, panel, quantile, rate, ratio, row,
    temporal_ui_link, value, variables, worse_above, worse_below,
)

OUT = Path(__file__).resolve().parent / "dashboards" / "agentsteps.json"
UID = "agentsteps-oncall"

LLM_ERRORS = 'outcome=~"retryable_error|fatal_error"'
RUN_FAILED = 'outcome="failed"'
# Temporal UI visibility queries, URL-encoded.
FAILED_AGENT_RUNS = "WorkflowType%3D%22AgentWorkflow%22%20AND%20ExecutionStatus%3D%22Failed%22"
RUNS_OF_SERIES_TYPE = "WorkflowType%3D%22${__field.labels.workflow_type}%22"
RPC = WORKER + ', namespace=~"$namespace"'
"""RPC metrics carry a namespace but no task queue."""


def drill_down(status: str = "") -> list[dict[str, Any]]:
    query = RUNS_OF_SERIES_TYPE + (f"%20AND%20ExecutionStatus%3D%22{status}%22" if status else "")
    return [temporal_ui_link("Runs of ${__field.labels.workflow_type} in the Temporal UI",
                             "${__field.labels.namespace}", query)]


def golden() -> list[dict[str, Any]]:
    runs, failed = rate("agentsteps_agent_runs_total"), rate("agentsteps_agent_runs_total", RUN_FAILED)
    llm, llm_err = rate("agentsteps_llm_requests_total", LLM, temporal=False), rate(
        "agentsteps_llm_requests_total", LLM, LLM_ERRORS, temporal=False)
    return [
        row("Golden signals"),
        panel("Run rate", "Agent runs finished per minute, every outcome.",
              [f"sum({runs}) * 60"], unit="short", kind="stat", width=3, height=5),
        panel("Run failure %", "Agent runs that ended failed, of all runs finished. The link opens the failed runs "
              "in the Temporal UI.", [ratio(failed, runs, "")], unit="percentunit", kind="stat",
              steps=worse_above(0.05, 0.2), width=3, height=5,
              links=[temporal_ui_link("Failed agent runs in the Temporal UI", "${namespace}", FAILED_AGENT_RUNS)]),
        panel("LLM error %", "Provider calls that failed (retryable or fatal), of all LLM calls. Contract "
              "violations are not errors here.", [ratio(llm_err, llm, "")], unit="percentunit", kind="stat",
              steps=worse_above(0.02, 0.1), width=3, height=5),
        panel("LLM latency p95", "95th percentile of provider request latency, all selected models.",
              [quantile(0.95, rate("agentsteps_llm_request_seconds_bucket", LLM, temporal=False))],
              unit="s", kind="stat", steps=worse_above(10, 30), width=3, height=5),
        panel("Cost per hour", "Estimated USD per hour from the worker's price table (a model missing from it "
              "costs 0).", [f"sum({rate('agentsteps_llm_cost_usd_total', LLM, temporal=False)}) * 3600"],
              unit="currencyUSD", kind="stat", steps=worse_above(20, 100), width=3, height=5),
        panel("Workers and pollers", "Worker processes that answer scrapes (up) of all scrape targets, and the "
              "Temporal long polls they hold. 0 up means nothing executes runs.", [
                  (f"sum(up{{{WORKER}}})", "up"),
                  (f"count(up{{{WORKER}}})", "targets"),
                  (f"sum({value('temporal_num_pollers')})", "pollers")],
              unit="short", kind="stat", steps=worse_below(1, 1), width=4, height=5),
        panel("Schedule-to-start p95", "How long tasks wait in the task queue before a worker takes them. "
              "Rising means too few workers or slots.", [
                  (quantile(0.95, rate("temporal_workflow_task_schedule_to_start_latency_seconds_bucket")),
                   "workflow"),
                  (quantile(0.95, rate("temporal_activity_schedule_to_start_latency_seconds_bucket")), "activity")],
              unit="s", kind="stat", steps=worse_above(1, 5), width=5, height=5),
    ]


def error_ratios() -> list[dict[str, Any]]:
    runs, failed = rate("agentsteps_agent_runs_total"), rate("agentsteps_agent_runs_total", RUN_FAILED)
    calls = rate("agentsteps_tool_calls_total", TOOL, temporal=False)
    return [
        row("Error ratios"),
        panel("LLM error ratio by model", "Failed provider calls (retryable or fatal) of all calls, per model.", [
            ratio(rate("agentsteps_llm_requests_total", LLM, LLM_ERRORS, temporal=False),
                  rate("agentsteps_llm_requests_total", LLM, temporal=False), "provider, model")],
              unit="percentunit", steps=worse_above(0.02, 0.1), width=6),
        panel("Tool error ratio by tool", "Failed calls of all calls, per tool: infra_error (the tool or its "
              "server is down) and error (the tool refused the call, often the model's bad arguments).", [
                  (ratio(rate("agentsteps_tool_calls_total", TOOL, 'outcome="infra_error"', temporal=False),
                         calls, "tool"), "{{tool}} infra"),
                  (ratio(rate("agentsteps_tool_calls_total", TOOL, 'outcome="error"', temporal=False),
                         calls, "tool"), "{{tool}} refused")],
              unit="percentunit", steps=worse_above(0.05, 0.2), width=6),
        panel("Run failure ratio by workflow type", "Failed runs of all runs, per workflow type. Click a series "
              "for its failed runs in the Temporal UI.", [
                  (ratio(failed, runs, "namespace, workflow_type"), "{{workflow_type}}")],
              unit="percentunit", steps=worse_above(0.05, 0.2), data_links=drill_down("Failed"), width=6),
        panel("Failed runs by reason", "Failed runs per second by why they failed: budget, contract, provider, "
              "invalid_spec, cancelled, timeout, internal (a bug: page). Click a series for the failed runs.", [
                  (f"sum by (namespace, workflow_type, reason) ({failed})", "{{workflow_type}} {{reason}}")],
              unit="ops", steps=worse_above(0.01, 0.1), data_links=drill_down("Failed"), width=6),
    ]


def llm() -> list[dict[str, Any]]:
    bucket = rate("agentsteps_llm_request_seconds_bucket", LLM, temporal=False)
    return [
        row("LLM: tokens, cost, latency"),
        panel("Tokens per second by model", "Tokens the provider reported, by direction (cache_read, cache_write "
              "and reasoning are parts of input and output).",
              [f"sum by (provider, model, direction) ({rate('agentsteps_llm_tokens_total', LLM, temporal=False)})"],
              unit="short"),
        panel("Estimated cost per hour by model (USD)", "USD per hour from the [worker.prices] table.",
              [f"sum by (provider, model) ({rate('agentsteps_llm_cost_usd_total', LLM, temporal=False)}) * 3600"],
              unit="currencyUSD", steps=worse_above(20, 100)),
        panel("LLM requests by outcome", "Calls per second: ok, violation (answered but broke the contract), "
              "retryable_error, fatal_error, precondition.",
              [f"sum by (model, outcome) ({rate('agentsteps_llm_requests_total', LLM, temporal=False)})"],
              unit="reqps"),
        panel("LLM request latency p50 / p95 / p99", "Provider request latency per model.", [
            (quantile(q, bucket, "model"), f"{{{{model}}}} p{int(q * 100)}") for q in (0.5, 0.95, 0.99)],
              unit="s", steps=worse_above(10, 30)),
    ]


def contracts() -> list[dict[str, Any]]:
    checks = rate("agentsteps_contract_checks_total", temporal=False)
    return [
        row("Contracts"),
        panel("Contract-failure rate (violations / checks)", "Failed checks of all checks, per contract and phase "
              "(a failed check counts once, however many violations it had).", [
                  ratio(rate("agentsteps_contract_violations_total", temporal=False), checks, "contract, phase")],
              unit="percentunit", steps=worse_above(0.1, 0.25)),
        panel("Violations by contract and kind", "Failed checks per second, by the kind of their first violation.",
              [f"sum by (contract, kind) ({rate('agentsteps_contract_violations_total', temporal=False)})"],
              unit="ops"),
        panel("Re-prompts by contract and kind", "Re-prompts the violation ladder sent.",
              [f"sum by (contract, kind) ({rate('agentsteps_reprompts_total')})"], unit="ops"),
        panel("Degradations by reason", "Fallback models and default results taken after the re-prompt budget.",
              [f"sum by (reason, target) ({rate('agentsteps_degradations_total')})"], unit="ops"),
    ]


def tools() -> list[dict[str, Any]]:
    calls = rate("agentsteps_tool_calls_total", TOOL, temporal=False)
    return [
        row("Tools"),
        panel("Tool success rate", "ok of all calls per tool (0 when a tool never succeeded).", [
            ratio(rate("agentsteps_tool_calls_total", TOOL, 'outcome="ok"', temporal=False), calls, "tool")],
              unit="percentunit", steps=worse_below(0.8, 0.95)),
        panel("Tool calls by outcome", "Calls per second: ok, error (the tool refused), infra_error (unreachable).",
              [f"sum by (tool, outcome) ({calls})"], unit="ops"),
        panel("Tool latency p50 / p95 / p99", "Tool call latency per tool.", [
            (quantile(q, rate("agentsteps_tool_call_seconds_bucket", TOOL, temporal=False), "tool"),
             f"{{{{tool}}}} p{int(q * 100)}") for q in (0.5, 0.95, 0.99)],
              unit="s", steps=worse_above(5, 30)),
    ]


def runs() -> list[dict[str, Any]]:
    return [
        row("Agent runs and steps"),
        panel("Run end-to-end latency p50 / p95 / p99", "Workflow time from start to finish.", [
            (quantile(q, rate("agentsteps_agent_run_seconds_bucket")), f"p{int(q * 100)}") for q in (0.5, 0.95, 0.99)],
              unit="s", steps=worse_above(120, 300)),
        panel("Step latency p50 / p95 / p99", "One LLM call plus the tool calls it asked for, per mode.", [
            (quantile(q, rate("agentsteps_agent_step_seconds_bucket"), "mode"), f"{{{{mode}}}} p{int(q * 100)}")
            for q in (0.5, 0.95, 0.99)], unit="s", steps=worse_above(30, 120)),
        panel("Runs by outcome", "Runs finished per second, by outcome and workflow type. Click a series for its "
              "runs in the Temporal UI.", [
                  (f"sum by (namespace, workflow_type, outcome) ({rate('agentsteps_agent_runs_total')})",
                   "{{workflow_type}} {{outcome}}")], unit="ops", data_links=drill_down()),
        panel("Steps per run (mean)", "Average steps a finished run took.", [
            f"sum({rate('agentsteps_agent_steps_per_run_sum')}) / sum({rate('agentsteps_agent_steps_per_run_count')})"],
              unit="short", steps=worse_above(20, 50)),
        panel("Steps per run p95", "95th percentile of steps per run.", [
            quantile(0.95, rate("agentsteps_agent_steps_per_run_bucket"))], unit="short", steps=worse_above(20, 50)),
    ]


def code_and_monitor() -> list[dict[str, Any]]:
    return [
        row("Code mode"),
        panel("Programs by outcome", "Code-mode programs finished: completed or the error kind.",
              [f"sum by (outcome) ({rate('agentsteps_code_programs_total', temporal=False)})"], unit="ops"),
        panel("Sandbox execution time p50 / p95 / p99", "Time programs spent executing in the Monty sandbox.", [
            (quantile(q, rate("agentsteps_code_sandbox_seconds_bucket", temporal=False)), f"p{int(q * 100)}")
            for q in (0.5, 0.95, 0.99)], unit="s", steps=worse_above(10, 60)),
        row("Monitor"),
        panel("Stalled tickets", "Stalled tickets found by each monitor's latest tick, whichever worker ran it "
              "(each worker keeps the value of the last tick it ran; the newest tick timestamp picks the worker).",
              [stalled_tickets()], unit="short", steps=worse_above(10, 50)),
        panel("Nudges and escalations", "Nudges posted and tickets escalated per second.", [
            (f"sum by (monitor) ({rate('agentsteps_monitor_nudges_total', temporal=False)})", "{{monitor}} nudges"),
            (f"sum by (monitor) ({rate('agentsteps_monitor_escalations_total', temporal=False)})",
             "{{monitor}} escalations")], unit="ops"),
        panel("Last monitor tick", "When each monitor last recorded a tick, on any worker. A schedule that "
              "stopped firing shows here first.", [
                  "max by (monitor) ("
                  + value("agentsteps_monitor_last_tick_timestamp_seconds", temporal=False) + ") * 1000"],
              unit="dateTimeFromNow", steps=INFO),
    ]


def stalled_tickets() -> str:
    """The stalled count from the worker whose tick is the newest, per monitor (issue 14 item 5)."""
    stamp = value("agentsteps_monitor_last_tick_timestamp_seconds", temporal=False)
    newest = f"({stamp} == on (monitor) group_left () max by (monitor) ({stamp}))"
    stalled = value("agentsteps_monitor_stalled_tickets", temporal=False)
    return f"max by (monitor) ({stalled} and on (job, instance, monitor) {newest})"


def temporal_health() -> list[dict[str, Any]]:
    used, free = value("temporal_worker_task_slots_used"), value("temporal_worker_task_slots_available")
    hit, miss = rate("temporal_sticky_cache_hit_total"), rate("temporal_sticky_cache_miss_total")
    return [
        row("Temporal worker health"),
        panel("Task slot utilisation", "Slots in use of all slots, per worker type. Near 100% means tasks wait "
              "for a slot: add workers or raise the slot limits.", [
                  (f"sum by (worker_type) ({used}) / (sum by (worker_type) ({used}) + sum by (worker_type) ({free}))",
                   "{{worker_type}}")], unit="percentunit", steps=worse_above(0.8, 0.95)),
        panel("Task slots used / available", "Slots in use and free, per worker type.", [
            (f"sum by (worker_type) ({used})", "{{worker_type}} used"),
            (f"sum by (worker_type) ({free})", "{{worker_type}} available")], unit="short"),
        panel("Schedule-to-start latency p95", "Task wait in the task queue. Rising with full slots: add workers.", [
            (quantile(0.95, rate("temporal_workflow_task_schedule_to_start_latency_seconds_bucket"), "task_queue"),
             "{{task_queue}} workflow"),
            (quantile(0.95, rate("temporal_activity_schedule_to_start_latency_seconds_bucket"), "task_queue"),
             "{{task_queue}} activity")], unit="s", steps=worse_above(1, 5)),
        panel("Pollers", "Long polls the workers hold open, by poller type. 0 on a task queue means nothing "
              "picks its tasks.", [(f"sum by (task_queue, poller_type) ({value('temporal_num_pollers')})",
                                     "{{task_queue}} {{poller_type}}")],
              unit="short", steps=worse_below(1, 1)),
        panel("Polls: with a task / empty", "Workflow polls that brought a task, and polls that expired empty "
              "(workflow and activity). Mostly empty polls mean spare capacity.", [
                  (f"sum({rate('temporal_workflow_task_queue_poll_succeed_total')})", "workflow with task"),
                  (f"sum({rate('temporal_workflow_task_queue_poll_empty_total')})", "workflow empty"),
                  (f"sum({rate('temporal_activity_poll_no_task_total')})", "activity empty")], unit="ops"),
        panel("Sticky cache hit ratio", "Workflow tasks served from the worker's cache, of cached and missed. "
              "Misses replay the whole history: low means the cache is too small for the running workflows.", [
                  f"sum({hit}) / (sum({hit}) + (sum({miss}) or vector(0)))"],
              unit="percentunit", steps=worse_below(0.8, 0.95)),
        panel("Sticky cache size, misses and forced evictions", "Cached workflows, misses per second and "
              "evictions forced by a full cache or a failed task.", [
                  (f"sum by (task_queue) ({value('temporal_sticky_cache_size')})", "{{task_queue}} size"),
                  (f"sum({miss})", "misses"),
                  (f"sum({rate('temporal_sticky_cache_total_forced_eviction_total')})", "forced evictions")],
              unit="short"),
        panel("Temporal RPC failures", "Failed calls from the worker to the Temporal service, by operation and "
              "status code. Sustained failures: the service or the network is unhealthy.", [
                  (f"sum by (operation, status_code) (rate(temporal_request_failure_total{{{RPC}}}"
                   f"[$__rate_interval]) and on (job, instance) {POLLING_WORKERS})",
                   "{{operation}} {{status_code}}")], unit="ops", steps=worse_above(0.1, 1)),
        panel("Temporal RPC latency p95", "Worker to Temporal service request latency, by operation.", [
            (quantile(0.95, f"rate(temporal_request_latency_seconds_bucket{{{RPC}}}[$__rate_interval]) "
                            f"and on (job, instance) {POLLING_WORKERS}", "operation"), "{{operation}}")],
              unit="s", steps=worse_above(0.5, 2)),
        panel("Workflow task failures", "Failed workflow tasks (a bug or non-determinism): the run is stuck until "
              "the code is fixed. Click a series for its runs.", [
                  (f"sum by (namespace, workflow_type, failure_reason) "
                   f"({rate('temporal_workflow_task_execution_failed_total')})",
                   "{{workflow_type}} {{failure_reason}}")],
              unit="ops", steps=worse_above(0.001, 0.01), data_links=drill_down()),
        panel("Activity failures", "Failed activity attempts (Temporal retries them).", [
            (f"sum by (activity_type) ({rate('temporal_activity_execution_failed_total')})", "{{activity_type}}")],
              unit="ops", steps=worse_above(0.1, 1)),
        panel("Activity execution latency p95", "Activity attempt latency by activity type.", [
            (quantile(0.95, rate("temporal_activity_execution_latency_seconds_bucket"), "activity_type"),
             "{{activity_type}}")], unit="s", steps=worse_above(30, 120)),
    ]


def sessions() -> list[dict[str, Any]]:
    started, ended = value("agentsteps_sessions_started_total"), value("agentsteps_sessions_ended_total")
    return [
        row("Sessions"),
        panel("Active sessions", "Sessions started minus sessions ended.",
              [f"sum({started}) - (sum({ended}) or vector(0))"], unit="short"),
        panel("Session turns by outcome", "Turns finished per second.",
              [f"sum by (outcome) ({rate('agentsteps_session_turns_total')})"], unit="ops"),
        panel("Turn latency p50 / p95", "Turn latency in workflow time, approvals included.", [
            (quantile(q, rate("agentsteps_session_turn_seconds_bucket")), f"p{int(q * 100)}") for q in (0.5, 0.95)],
              unit="s", steps=worse_above(60, 300)),
        panel("Approvals by outcome", "Approvals decided, and tool calls that asked for one.", [
            (f"sum by (outcome) ({rate('agentsteps_approvals_total')})", "{{outcome}}"),
            (f"sum by (tool) ({rate('agentsteps_approvals_requested_total', TOOL)})", "{{tool}} requested")],
              unit="ops"),
        panel("Approval wait p95", "How long a tool call waited for a person's decision.", [
            quantile(0.95, rate("agentsteps_approval_wait_seconds_bucket"))], unit="s", steps=worse_above(3600, 14400)),
        panel("Continue-as-new and context-policy actions", "Sessions that continued-as-new, and requests a "
              "context policy compacted.", [
                  (f"sum({rate('agentsteps_session_continued_as_new_total')})", "continued as new"),
                  (f"sum by (action) ({rate('agentsteps_context_actions_total', temporal=False)})", "{{action}}")],
              unit="ops"),
    ]


def build() -> dict[str, Any]:
    panels = layout([*golden(), *error_ratios(), *llm(), *contracts(), *tools(), *runs(), *code_and_monitor(),
                     *temporal_health(), *sessions()])
    return {
        "__inputs": [],
        "__requires": REQUIRES,
        "id": None,
        "uid": UID,
        "title": "agentsteps",
        "description": "LLM agent steps on Temporal: golden signals first, then error ratios, LLM, contracts, "
                       "tools, runs, code mode, monitor, Temporal worker health and sessions.",
        "tags": ["agentsteps", "temporal", "llm"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 2,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": variables()},
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
