"""Writes alerts_test.yml: ``python deploy/prometheus/build_alerts_test.py > deploy/prometheus/alerts_test.yml``.

The scenarios are written here; histograms are expanded to the exact bucket
layouts the worker exports (imported from telemetry/), and each firing case's
annotations are taken from alerts.yml, so the two files cannot drift apart.
tests/deploy/test_deploy_promtool.py checks the committed file is this script's
output, and tests/deploy/test_alert_series.py checks every series against a real scrape.
"""

import json
import re
from pathlib import Path

import yaml

from agentsteps.telemetry.metrics import LATENCY_BUCKETS as LAT
from agentsteps.telemetry.metrics import REPLAY_BUCKETS as REPLAY
from agentsteps.telemetry.runtime import RUN_LATENCY_BUCKETS as RUN

HERE = Path(__file__).resolve().parent
out: list[str] = []
W = out.append


def fmt(b):
    return repr(float(b)) if b != "+Inf" else "+Inf"


def hist(name, labels, bounds, lo, per_min, n):
    """Every observation lands in (lo, next bound]: buckets below lo stay 0, the rest grow per_min a minute."""
    lines = []
    for b in [*bounds, "+Inf"]:
        grows = b == "+Inf" or b > lo
        vals = f"0+{per_min}x{n}" if grows else f"0x{n}"
        lab = ", ".join([*labels, f'le="{fmt(b)}"'])
        lines.append(f"      - series: '{name}{{{lab}}}'\n        values: '{vals}'")
    return "\n".join(lines)


def case(comment, series, checks, interval="1m"):
    W(f"  # {comment}")
    W(f"  - interval: {interval}\n    input_series:")
    for s in series:
        W(s)
    W("    alert_rule_test:")
    for c in checks:
        W(c)


def series(sel, values):
    return f"      - series: '{sel}'\n        values: '{values}'"


def quiet(alert, at):
    return f"      - eval_time: {at}\n        alertname: {alert}\n        exp_alerts: []"


RULES = {r["alert"]: r for g in yaml.safe_load((HERE / "alerts.yml").read_text())["groups"] for r in g["rules"]}


def fires(alert, at, labels, summary):
    ann = dict(RULES[alert]["annotations"])
    ann["summary"] = summary
    ann["description"] = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], ann["description"])
    s = f"      - eval_time: {at}\n        alertname: {alert}\n        exp_alerts:\n          - exp_labels:\n"
    for k, v in labels.items():
        s += f"              {k}: {v}\n"
    s += "            exp_annotations:\n"
    for k, v in ann.items():
        s += f"              {k}: {json.dumps(v)}\n"
    return s.rstrip("\n")


JOB = 'job="agentsteps-worker", instance="worker-a:9464"'
JOBB = 'job="agentsteps-worker", instance="worker-b:9464"'
TQ = 'namespace="default", task_queue="agentsteps"'
RUNL = f'{JOB}, {TQ}, workflow_type="AgentWorkflow"'

W("# promtool unit tests for alerts.yml: `promtool test rules deploy/prometheus/alerts_test.yml`.")
W("# Every input series (name, label names, bucket bounds) is one a real worker exports:")
W("# tests/deploy/test_alert_series.py checks this file against a real worker's /metrics scrape.")
W("# Every alert has a case where it fires and one where it stays quiet.")
W("rule_files:\n  - alerts.yml\n\nevaluation_interval: 1m\n\ntests:")


# --- workers
case(
    "One worker stops answering scrapes; the other stays up.",
    [series(f"up{{{JOB}}}", "1 1 1 0 0 0 0 0"), series(f"up{{{JOBB}}}", "1 1 1 1 1 1 1 1")],
    [
        quiet("AgentStepsWorkerDown", "4m"),
        fires(
            "AgentStepsWorkerDown",
            "6m",
            {"severity": "critical", "job": "agentsteps-worker", "instance": "worker-a:9464"},
            "Worker worker-a:9464 is down",
        ),
        quiet("AgentStepsWorkersAbsent", "7m"),
    ],
)
case(
    "Every worker is gone: no up series at all after 3 minutes.",
    [series(f"up{{{JOB}}}", "1 1 1"), series('up{job="other", instance="x:1"}', "1x20")],
    [
        quiet("AgentStepsWorkersAbsent", "4m"),
        fires("AgentStepsWorkersAbsent", "15m", {"severity": "critical"}, "No agentsteps worker is up"),
    ],
)
case(
    "Activity slots run out on worker-a for 10 minutes; workflow slots stay free.",
    [
        series(f'temporal_worker_task_slots_available{{{JOB}, {TQ}, worker_type="ActivityWorker"}}', "100 50 0x12"),
        series(f'temporal_worker_task_slots_available{{{JOB}, {TQ}, worker_type="WorkflowWorker"}}', "100x14"),
        series(f'temporal_worker_task_slots_available{{{JOB}, {TQ}, worker_type="LocalActivityWorker"}}', "0x14"),
    ],
    [
        quiet("AgentStepsTaskSlotsExhausted", "4m"),
        fires(
            "AgentStepsTaskSlotsExhausted",
            "12m",
            {
                "severity": "warning",
                "instance": "worker-a:9464",
                "task_queue": "agentsteps",
                "worker_type": "ActivityWorker",
            },
            "ActivityWorker slots on worker-a:9464 (agentsteps) are all in use",
        ),
    ],
)
case(
    "Healthy slots: some used, none exhausted.",
    [series(f'temporal_worker_task_slots_available{{{JOB}, {TQ}, worker_type="ActivityWorker"}}', "100 80 60x12")],
    [quiet("AgentStepsTaskSlotsExhausted", "12m")],
)
case(
    "Workflow tasks wait 2.5-5 s and activities 10-30 s in the queue.",
    [
        hist("temporal_workflow_task_schedule_to_start_latency_seconds_bucket", [JOB, TQ], LAT, 2.5, 10, 40),
        hist("temporal_activity_schedule_to_start_latency_seconds_bucket", [JOB, TQ], LAT, 10, 10, 40),
    ],
    [
        quiet("AgentStepsWorkflowTaskScheduleToStartHigh", "5m"),
        fires(
            "AgentStepsWorkflowTaskScheduleToStartHigh",
            "30m",
            {"severity": "warning", "namespace": "default", "task_queue": "agentsteps"},
            "Workflow tasks on agentsteps wait 4.875s (p95) before a worker picks them up",
        ),
        quiet("AgentStepsActivityScheduleToStartHigh", "5m"),
        fires(
            "AgentStepsActivityScheduleToStartHigh",
            "30m",
            {"severity": "warning", "namespace": "default", "task_queue": "agentsteps"},
            "Activities on agentsteps wait 29s (p95) before a worker picks them up",
        ),
    ],
)
case(
    "Tasks start within 50-100 ms.",
    [
        hist("temporal_workflow_task_schedule_to_start_latency_seconds_bucket", [JOB, TQ], LAT, 0.05, 10, 40),
        hist("temporal_activity_schedule_to_start_latency_seconds_bucket", [JOB, TQ], LAT, 0.05, 10, 40),
    ],
    [quiet("AgentStepsWorkflowTaskScheduleToStartHigh", "30m"), quiet("AgentStepsActivityScheduleToStartHigh", "30m")],
)
case(
    "A non-deterministic AgentWorkflow task fails every minute; another type failed once long ago.",
    [
        series(
            f'temporal_workflow_task_execution_failed_total{{{RUNL}, failure_reason="NondeterminismError"}}', "0+1x30"
        ),
        series(
            f'temporal_workflow_task_execution_failed_total{{{JOB}, {TQ}, workflow_type="SessionWorkflow", '
            f'failure_reason="WorkflowError"}}',
            "0 1 1x28",
        ),
    ],
    [
        quiet("AgentStepsWorkflowTaskFailures", "5m"),
        fires(
            "AgentStepsWorkflowTaskFailures",
            "25m",
            {
                "severity": "critical",
                "namespace": "default",
                "task_queue": "agentsteps",
                "workflow_type": "AgentWorkflow",
                "failure_reason": "NondeterminismError",
            },
            "AgentWorkflow workflow tasks keep failing (NondeterminismError) on agentsteps",
        ),
    ],
)
case(
    "Temporal RPCs: 20% UNAVAILABLE on worker-a; NOT_FOUND answers on worker-b are not failures.",
    [
        series(f'temporal_request_total{{{JOB}, {TQ}, operation="RespondActivityTaskCompleted"}}', "0+100x30"),
        series(
            f'temporal_request_failure_total{{{JOB}, namespace="default", '
            f'operation="RespondActivityTaskCompleted", status_code="UNAVAILABLE"}}',
            "0+20x30",
        ),
        series(
            f'temporal_request_total{{{JOBB}, namespace="default", operation="DescribeWorkflowExecution"}}', "0+100x30"
        ),
        series(
            f'temporal_request_failure_total{{{JOBB}, namespace="default", '
            f'operation="DescribeWorkflowExecution", status_code="NOT_FOUND"}}',
            "0+50x30",
        ),
    ],
    [
        quiet("AgentStepsTemporalRpcFailures", "3m"),
        fires(
            "AgentStepsTemporalRpcFailures",
            "20m",
            {"severity": "critical", "instance": "worker-a:9464"},
            "20% of worker-a:9464's calls to Temporal fail",
        ),
    ],
)
case(
    "Two failed RPCs out of three calls: below the volume guard.",
    [
        series(f'temporal_request_total{{{JOB}, {TQ}, operation="RespondActivityTaskCompleted"}}', "0 1 2 3x20"),
        series(
            f'temporal_request_failure_total{{{JOB}, namespace="default", '
            f'operation="RespondActivityTaskCompleted", status_code="UNAVAILABLE"}}',
            "0 1 2x21",
        ),
    ],
    [quiet("AgentStepsTemporalRpcFailures", "6m")],
)
case(
    "worker-a's workflow-task polls fail (UNAVAILABLE) every 10 s; worker-b's were cancelled at shutdown.",
    [
        series(
            f'temporal_long_request_failure_total{{{JOB}, {TQ}, operation="PollWorkflowTaskQueue", '
            f'status_code="UNAVAILABLE"}}',
            "0+6x30",
        ),
        series(
            f'temporal_long_request_failure_total{{{JOBB}, {TQ}, operation="PollWorkflowTaskQueue", '
            f'status_code="CANCELLED"}}',
            "0+60x30",
        ),
    ],
    [
        quiet("AgentStepsTemporalPollFailures", "3m"),
        fires(
            "AgentStepsTemporalPollFailures",
            "20m",
            {
                "severity": "critical",
                "instance": "worker-a:9464",
                "task_queue": "agentsteps",
                "operation": "PollWorkflowTaskQueue",
            },
            "worker-a:9464 fails to poll agentsteps (PollWorkflowTaskQueue)",
        ),
    ],
)
case(
    "A poll failed once: not an outage.",
    [
        series(
            f'temporal_long_request_failure_total{{{JOB}, {TQ}, operation="PollWorkflowTaskQueue", '
            f'status_code="UNAVAILABLE"}}',
            "0 1 1x28",
        )
    ],
    [quiet("AgentStepsTemporalPollFailures", "20m")],
)


# --- runs
case(
    "30 runs a minute, 6 fail on the provider (20%), 4 on their budget (13%): both burn windows exceed 14.4x.",
    [
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="completed"}}', "0+20x400"),
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="failed", reason="provider"}}', "0+6x400"),
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="failed", reason="budget"}}', "0+4x400"),
    ],
    [
        quiet("AgentStepsRunErrorBudgetBurnFast", "1m"),
        fires(
            "AgentStepsRunErrorBudgetBurnFast",
            "70m",
            {"severity": "critical"},
            "Runs fail at 20% for operator-owned reasons: the 99% SLO's budget burns 14x too fast",
        ),
        fires(
            "AgentStepsRunErrorBudgetBurnSlow",
            "380m",
            {"severity": "warning"},
            "Runs fail at 20% for operator-owned reasons: the 99% SLO's budget burns 6x too fast",
        ),
        fires(
            "AgentStepsRunsFailingOnBudget",
            "60m",
            {"severity": "warning"},
            "13.33% of runs end with their token or step budget spent",
        ),
    ],
)
case(
    "Failures the operator does not own (contract, cancelled) burn no budget; 1% provider failures are within the SLO.",
    [
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="completed"}}', "0+90x400"),
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="failed", reason="contract"}}', "0+30x400"),
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="failed", reason="cancelled"}}', "0+30x400"),
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="failed", reason="provider"}}', "0+1x400"),
    ],
    [
        quiet("AgentStepsRunErrorBudgetBurnFast", "70m"),
        quiet("AgentStepsRunErrorBudgetBurnSlow", "380m"),
        quiet("AgentStepsRunsFailingOnBudget", "60m"),
    ],
)
case(
    "One failed run out of two: below the volume guard.",
    [
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="completed"}}', "0 1 1x100"),
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="failed", reason="internal"}}', "0 1 1x100"),
        series(f'agentsteps_agent_runs_total{{{RUNL}, outcome="failed", reason="budget"}}', "0 1 1x100"),
    ],
    [quiet("AgentStepsRunErrorBudgetBurnFast", "30m"), quiet("AgentStepsRunsFailingOnBudget", "30m")],
)
case(
    "Runs take 15 to 30 minutes.",
    [hist("agentsteps_agent_run_seconds_bucket", [RUNL, 'outcome="completed"'], RUN, 900, 2, 90)],
    [
        quiet("AgentStepsRunLatencyP95High", "10m"),
        fires(
            "AgentStepsRunLatencyP95High", "60m", {"severity": "warning"}, "p95 agent run end-to-end latency is 29m 15s"
        ),
    ],
)
case(
    "Runs take 2 to 5 minutes.",
    [hist("agentsteps_agent_run_seconds_bucket", [RUNL, 'outcome="completed"'], RUN, 120, 2, 90)],
    [quiet("AgentStepsRunLatencyP95High", "60m")],
)
case(
    'Contract "llm.call" fails 40 of every 100 checks (one check, many violations, counts once); "final" never fails.',
    [
        series(
            f'agentsteps_contract_checks_total{{{JOB}, contract="llm.call", phase="post", outcome="pass"}}', "0+60x30"
        ),
        series(
            f'agentsteps_contract_checks_total{{{JOB}, contract="llm.call", phase="post", outcome="fail"}}', "0+40x30"
        ),
        series(
            f'agentsteps_contract_checks_total{{{JOB}, contract="final", phase="post", outcome="pass"}}', "0+100x30"
        ),
    ],
    [
        quiet("AgentStepsContractFailureRateHigh", "5m"),
        fires(
            "AgentStepsContractFailureRateHigh",
            "25m",
            {"severity": "warning", "contract": "llm.call"},
            "Contract llm.call fails 40% of its checks",
        ),
    ],
)
case(
    "A healthy contract, and a tiny one failing 1 of 2 checks (volume guard), stay quiet.",
    [
        series(
            f'agentsteps_contract_checks_total{{{JOB}, contract="llm.call", phase="post", outcome="pass"}}', "0+95x30"
        ),
        series(
            f'agentsteps_contract_checks_total{{{JOB}, contract="llm.call", phase="post", outcome="fail"}}', "0+5x30"
        ),
        series(
            f'agentsteps_contract_checks_total{{{JOB}, contract="code.program", phase="post", outcome="fail"}}',
            "0 1 1x28",
        ),
        series(
            f'agentsteps_contract_checks_total{{{JOB}, contract="code.program", phase="post", outcome="pass"}}',
            "0 1 1x28",
        ),
    ],
    [quiet("AgentStepsContractFailureRateHigh", "25m")],
)


# --- llm
M = 'provider="openai", model="gpt-4o-2024-08-06"'
case(
    "gpt-4o: 30% of calls are 5xx/429; the fallback model is healthy.",
    [
        series(f'agentsteps_llm_requests_total{{{JOB}, {M}, outcome="ok"}}', "0+70x30"),
        series(f'agentsteps_llm_requests_total{{{JOB}, {M}, outcome="retryable_error"}}', "0+30x30"),
        series(
            f'agentsteps_llm_requests_total{{{JOB}, provider="openai", model="gpt-4o-mini-2024-07-18", outcome="ok"}}',
            "0+50x30",
        ),
    ],
    [
        quiet("AgentStepsLLMErrorRatioHigh", "5m"),
        fires(
            "AgentStepsLLMErrorRatioHigh",
            "25m",
            {"severity": "warning", "provider": "openai", "model": "gpt-4o-2024-08-06"},
            "30% of calls to openai/gpt-4o-2024-08-06 fail",
        ),
    ],
)
case(
    "Contract violations are not provider errors, and 1 error in 2 calls is below the volume guard.",
    [
        series(f'agentsteps_llm_requests_total{{{JOB}, {M}, outcome="violation"}}', "0+50x30"),
        series(f'agentsteps_llm_requests_total{{{JOB}, {M}, outcome="ok"}}', "0+50x30"),
        series(
            f'agentsteps_llm_requests_total{{{JOB}, provider="anthropic", model="claude-sonnet-4-20250514", '
            f'outcome="fatal_error"}}',
            "0 1 1x28",
        ),
        series(
            f'agentsteps_llm_requests_total{{{JOB}, provider="anthropic", model="claude-sonnet-4-20250514", '
            f'outcome="ok"}}',
            "0 1 1x28",
        ),
    ],
    [quiet("AgentStepsLLMErrorRatioHigh", "25m")],
)
case(
    "Every LLM request takes between 30 s and 60 s.",
    [hist("agentsteps_llm_request_seconds_bucket", [JOB, M], LAT, 30, 10, 40)],
    [
        quiet("AgentStepsLLMLatencyP95High", "10m"),
        fires(
            "AgentStepsLLMLatencyP95High",
            "30m",
            {"severity": "warning", "provider": "openai", "model": "gpt-4o-2024-08-06"},
            "p95 LLM latency for gpt-4o-2024-08-06 is 58.5s",
        ),
    ],
)
case(
    "LLM requests take 1 to 2.5 s.",
    [hist("agentsteps_llm_request_seconds_bucket", [JOB, M], LAT, 1, 10, 40)],
    [quiet("AgentStepsLLMLatencyP95High", "30m")],
)
case(
    "50k tokens a minute = 3M an hour, above the 2M budget (cache reads are part of input, not added).",
    [
        series(f'agentsteps_llm_tokens_total{{{JOB}, {M}, direction="input"}}', "0+40000x120"),
        series(f'agentsteps_llm_tokens_total{{{JOB}, {M}, direction="cache_read"}}', "0+40000x120"),
        series(f'agentsteps_llm_tokens_total{{{JOB}, {M}, direction="output"}}', "0+10000x120"),
        series(
            f'agentsteps_llm_tokens_total{{{JOB}, provider="anthropic", model="claude-sonnet-4-20250514", '
            f'direction="input"}}',
            "0+20000x120",
        ),
    ],
    [
        fires(
            "AgentStepsTokenBurnAboveBudget",
            "90m",
            {"severity": "warning"},
            "Token burn is 4.2M tokens/hour, above the 2M/hour budget",
        )
    ],
)
case(
    "20k tokens a minute is within the budget.",
    [series(f'agentsteps_llm_tokens_total{{{JOB}, {M}, direction="input"}}', "0+20000x120")],
    [quiet("AgentStepsTokenBurnAboveBudget", "90m")],
)
case(
    "0.5 USD a minute = 30 USD an hour, above the 20 USD/hour budget.",
    [series(f"agentsteps_llm_cost_usd_total{{{JOB}, {M}}}", "0+0.5x120")],
    [
        quiet("AgentStepsCostBurnHigh", "5m"),
        fires(
            "AgentStepsCostBurnHigh",
            "90m",
            {"severity": "warning"},
            "LLM spend is 30 USD/hour, above the 20 USD/hour budget",
        ),
    ],
)
case(
    "0.1 USD a minute is within the budget.",
    [series(f"agentsteps_llm_cost_usd_total{{{JOB}, {M}}}", "0+0.1x120")],
    [quiet("AgentStepsCostBurnHigh", "90m")],
)


# --- tools
case(
    "search_issues has been down since the pod started: no ok series at all. get_issue is healthy.",
    [
        series(f'agentsteps_tool_calls_total{{{JOB}, tool="search_issues", outcome="infra_error"}}', "0+5x30"),
        series(f'agentsteps_tool_calls_total{{{JOB}, tool="get_issue", outcome="ok"}}', "0+10x30"),
    ],
    [
        quiet("AgentStepsToolInfraErrorsHigh", "5m"),
        fires(
            "AgentStepsToolInfraErrorsHigh",
            "25m",
            {"severity": "warning", "tool": "search_issues"},
            "Tool search_issues fails for infrastructure reasons on 100% of calls",
        ),
    ],
)
case(
    "The model's bad arguments (outcome=error) are not an outage; 1 infra error in 2 calls is below the volume guard.",
    [
        series(f'agentsteps_tool_calls_total{{{JOB}, tool="search_issues", outcome="error"}}', "0+10x30"),
        series(f'agentsteps_tool_calls_total{{{JOB}, tool="search_issues", outcome="ok"}}', "0+1x30"),
        series(f'agentsteps_tool_calls_total{{{JOB}, tool="get_issue", outcome="infra_error"}}', "0 1 1x28"),
        series(f'agentsteps_tool_calls_total{{{JOB}, tool="get_issue", outcome="ok"}}', "0 1 1x28"),
    ],
    [quiet("AgentStepsToolInfraErrorsHigh", "25m")],
)
case(
    "MCP server tickets is down on both workers for 10 minutes; github flaps on one worker only.",
    [
        series(f'agentsteps_mcp_server_up{{{JOB}, server="tickets"}}', "1 1 0x12"),
        series(f'agentsteps_mcp_server_up{{{JOBB}, server="tickets"}}', "1 1 0x12"),
        series(f'agentsteps_mcp_server_up{{{JOB}, server="github"}}', "0x14"),
        series(f'agentsteps_mcp_server_up{{{JOBB}, server="github"}}', "1x14"),
    ],
    [
        quiet("AgentStepsMcpServerDown", "4m"),
        fires(
            "AgentStepsMcpServerDown",
            "12m",
            {"severity": "critical", "server": "tickets"},
            "MCP server tickets is down",
        ),
    ],
)
case(
    "An MCP server down for 3 minutes, then back: quiet.",
    [series(f'agentsteps_mcp_server_up{{{JOB}, server="tickets"}}', "1 0 0 0 1x10")],
    [quiet("AgentStepsMcpServerDown", "4m"), quiet("AgentStepsMcpServerDown", "12m")],
)
case(
    "A sandbox process crashes every minute.",
    [
        series(f'agentsteps_code_programs_total{{{JOB}, outcome="crashed"}}', "0+1x40"),
        series(f'agentsteps_code_programs_total{{{JOB}, outcome="completed"}}', "0+10x40"),
    ],
    [
        quiet("AgentStepsSandboxCrashes", "2m"),
        fires(
            "AgentStepsSandboxCrashes",
            "30m",
            {"severity": "warning"},
            "15 code-mode sandbox processes crashed in 15 minutes",
        ),
    ],
)
case(
    "Programs that fail on their own (exceptions, timeouts) are not crashes; one crash is not a pattern.",
    [
        series(f'agentsteps_code_programs_total{{{JOB}, outcome="exception"}}', "0+10x40"),
        series(f'agentsteps_code_programs_total{{{JOB}, outcome="timeout"}}', "0+10x40"),
        series(f'agentsteps_code_programs_total{{{JOB}, outcome="crashed"}}', "0 1 1x38"),
    ],
    [quiet("AgentStepsSandboxCrashes", "30m")],
)
case(
    "A tampered snapshot pages at once.",
    [
        series(f'agentsteps_code_programs_total{{{JOB}, outcome="tampered"}}', "0 0 1 1x10"),
        series(f'agentsteps_code_programs_total{{{JOB}, outcome="completed"}}', "0+10x12"),
    ],
    [
        quiet("AgentStepsSnapshotTampered", "1m"),
        fires(
            "AgentStepsSnapshotTampered",
            "3m",
            {"severity": "critical"},
            "A code-mode snapshot failed its integrity check",
        ),
        quiet("AgentStepsSnapshotTampered", "20m"),
    ],
)

case(
    "A pod the payload store refuses pages after five minutes; the healthy pod beside it stays quiet.",
    [
        series('agentsteps_payload_store_denied_total{job="agentsteps-worker", instance="bad:9464"}', "0 0+2x20"),
        series('agentsteps_payload_store_denied_total{job="agentsteps-worker", instance="good:9464"}', "0x21"),
    ],
    [
        quiet("AgentStepsPayloadStoreDenied", "2m"),
        fires(
            "AgentStepsPayloadStoreDenied",
            "10m",
            {"severity": "critical", "instance": "bad:9464"},
            "The payload store refuses worker bad:9464",
        ),
        quiet("AgentStepsPayloadStoreDenied", "40m"),
    ],
)

case(
    "A worker without a rolled-out snapshot key warns once it lasts past a rollout; a blip does not.",
    [
        series(
            'agentsteps_code_programs_total{job="agentsteps-worker", instance="old:9464", outcome="key_unknown"}',
            "0 0+1x40",
        ),
        series(
            'agentsteps_code_programs_total{job="agentsteps-worker", instance="new:9464", outcome="key_unknown"}',
            "0 1 1x39",
        ),
        series(
            'agentsteps_code_programs_total{job="agentsteps-worker", instance="new:9464", outcome="completed"}',
            "0+10x40",
        ),
    ],
    [
        quiet("AgentStepsSnapshotKeyUnknown", "10m"),
        fires(
            "AgentStepsSnapshotKeyUnknown",
            "35m",
            {"severity": "warning", "instance": "old:9464"},
            "Worker old:9464 lacks a snapshot key other workers sign with",
        ),
    ],
)


# --- a fleet of sessions: the sticky cache, replays, sticky-queue timeouts, the payload store
SESSIONS = f'{JOB}, {TQ}, workflow_type="SessionWorkflow"'
SESSIONS_B = f'{JOBB}, {TQ}, workflow_type="SessionWorkflow"'
MISS, MISS_B = f"{JOB}, {TQ}", f"{JOBB}, {TQ}"
"""A miss carries no workflow type: the run is not known until its history is fetched."""
REPLAYS = 'workflow_type="SessionWorkflow"'
case(
    "worker-a finds 60% of its sticky tasks cached (more sessions than its cache); worker-b 99%.",
    [
        series(f"temporal_sticky_cache_hit_total{{{SESSIONS}}}", "0+30x40"),
        series(f"temporal_sticky_cache_miss_total{{{MISS}}}", "0+20x40"),
        series(f"temporal_sticky_cache_hit_total{{{SESSIONS_B}}}", "0+99x40"),
        series(f"temporal_sticky_cache_miss_total{{{MISS_B}}}", "0+1x40"),
    ],
    [
        quiet("AgentStepsStickyCacheHitRatioLow", "10m"),
        fires(
            "AgentStepsStickyCacheHitRatioLow",
            "35m",
            {"severity": "warning", "instance": "worker-a:9464"},
            "Worker worker-a:9464 finds 60% of its sticky tasks in its cache",
        ),
    ],
)
case(
    "Half the sticky tasks miss on a quiet worker (two a minute): too few to page.",
    [
        series(f"temporal_sticky_cache_hit_total{{{SESSIONS}}}", "0+2x40"),
        series(f"temporal_sticky_cache_miss_total{{{MISS}}}", "0+2x40"),
    ],
    [quiet("AgentStepsStickyCacheHitRatioLow", "35m")],
)
case(
    "Sessions on worker-a replay for 2.5-5 s each (long histories), ten a minute.",
    [
        hist("agentsteps_workflow_replay_seconds_bucket", [JOB, REPLAYS], REPLAY, 2.5, 10, 40),
        series(f"agentsteps_workflow_replay_seconds_count{{{JOB}, {REPLAYS}}}", "0+10x40"),
    ],
    [
        quiet("AgentStepsReplayLatencyHigh", "10m"),
        fires(
            "AgentStepsReplayLatencyHigh",
            "30m",
            {"severity": "warning", "instance": "worker-a:9464"},
            "Replays on worker worker-a:9464 take 4.875s (p95)",
        ),
    ],
)
case(
    "Replays of 25-50 ms (short histories): quiet.",
    [
        hist("agentsteps_workflow_replay_seconds_bucket", [JOB, REPLAYS], REPLAY, 0.025, 10, 40),
        series(f"agentsteps_workflow_replay_seconds_count{{{JOB}, {REPLAYS}}}", "0+10x40"),
    ],
    [quiet("AgentStepsReplayLatencyHigh", "30m")],
)
case(
    "worker-a rebuilds a run a second, a quarter of them cache misses: its sticky tasks time out to the normal queue."
    " worker-b rebuilds as many, nearly all misses; worker-c rebuilds a few with no miss series at all.",
    [
        series(f"agentsteps_workflow_replay_seconds_count{{{JOB}, {REPLAYS}}}", "0+60x40"),
        series(f"temporal_sticky_cache_miss_total{{{MISS}}}", "0+15x40"),
        series(f"agentsteps_workflow_replay_seconds_count{{{JOBB}, {REPLAYS}}}", "0+60x40"),
        series(f"temporal_sticky_cache_miss_total{{{MISS_B}}}", "0+55x40"),
        series(
            f'agentsteps_workflow_replay_seconds_count{{job="agentsteps-worker", instance="worker-c:9464", {REPLAYS}}}',
            "0+6x40",
        ),
    ],
    [
        quiet("AgentStepsStickyQueueTimeouts", "10m"),
        fires(
            "AgentStepsStickyQueueTimeouts",
            "30m",
            {"severity": "warning", "instance": "worker-a:9464"},
            "Worker worker-a:9464 rebuilds 750m runs a second from whole histories that were not cache misses",
        ),
    ],
)
case(
    "Every rebuild is a cache miss: quiet.",
    [
        series(f"agentsteps_workflow_replay_seconds_count{{{JOB}, {REPLAYS}}}", "0+60x40"),
        series(f"temporal_sticky_cache_miss_total{{{MISS}}}", "0+60x40"),
    ],
    [quiet("AgentStepsStickyQueueTimeouts", "30m")],
)
STORE = 'job="agentsteps-worker", instance="worker-a:9464"'
case(
    "Workers write 30 MB a minute to the payload store (43 GB a day, over the 20 GB budget).",
    [
        series(f'agentsteps_payload_store_bytes_total{{{STORE}, op="put"}}', "0+30000000x150"),
        series(f'agentsteps_payload_store_bytes_total{{{STORE}, op="get"}}', "0+90000000x150"),
    ],
    [
        quiet("AgentStepsPayloadStoreGrowthHigh", "20m"),
        fires(
            "AgentStepsPayloadStoreGrowthHigh",
            "120m",
            {"severity": "warning"},
            "The payload store grows by 40.23GiB a day",
        ),
    ],
)
case(
    "10 MB a minute written (14 GB a day) and much more read: quiet.",
    [
        series(f'agentsteps_payload_store_bytes_total{{{STORE}, op="put"}}', "0+10000000x150"),
        series(f'agentsteps_payload_store_bytes_total{{{STORE}, op="get"}}', "0+900000000x150"),
    ],
    [quiet("AgentStepsPayloadStoreGrowthHigh", "120m")],
)
case(
    "2,000 PUTs and 1,000 in-place copies a second, near S3's 3,500 a prefix.",
    [
        series(f'agentsteps_payload_store_requests_total{{{STORE}, op="put"}}', "0+120000x30"),
        series(f'agentsteps_payload_store_requests_total{{{STORE}, op="reference"}}', "0+60000x30"),
    ],
    [
        quiet("AgentStepsPayloadStoreRequestRateHigh", "4m"),
        fires(
            "AgentStepsPayloadStoreRequestRateHigh",
            "25m",
            {"severity": "warning"},
            "Workers send 3k write-class requests a second to the payload store",
        ),
    ],
)
case(
    "10,000 GETs a second (not write-class) and 1,000 PUTs: quiet.",
    [
        series(f'agentsteps_payload_store_requests_total{{{STORE}, op="get"}}', "0+600000x30"),
        series(f'agentsteps_payload_store_requests_total{{{STORE}, op="put"}}', "0+60000x30"),
    ],
    [quiet("AgentStepsPayloadStoreRequestRateHigh", "25m")],
)


# --- quotas and budgets (workflow-side: Temporal's labels, recorded by the run that reserved the call)
def budget(tenant, period, limit, instance=JOB):
    return (
        f'agentsteps_tenant_budget_used_ratio{{{instance}, {TQ}, workflow_type="AgentWorkflow", '
        f'tenant="{tenant}", period="{period}", limit="{limit}"}}'
    )


def spend(tenant, instance=JOB):
    return f'agentsteps_tenant_spend_usd_total{{{instance}, {TQ}, workflow_type="AgentWorkflow", tenant="{tenant}"}}'


def quota_series(name, quota, instance=JOB):
    return f'{name}{{{instance}, {TQ}, workflow_type="AgentWorkflow", quota="{quota}"}}'


case(
    "Tenant acme's day hard budget climbs past 80% while it spends; beta stays at 30%.",
    [
        series(budget("acme", "day", "hard"), "0.5 0.6 0.7 0.8 0.85 0.9x20"),
        series(spend("acme"), "0+0.5x25"),
        series(budget("beta", "day", "hard"), "0.3x25"),
        series(spend("beta"), "0+0.1x25"),
    ],
    [
        quiet("AgentStepsTenantBudgetNearlySpent", "2m"),
        fires(
            "AgentStepsTenantBudgetNearlySpent",
            "15m",
            {"severity": "warning", "tenant": "acme", "period": "day", "limit": "hard"},
            "Tenant acme has used 90% of its day hard budget",
        ),
        quiet("AgentStepsTenantBudgetSpent", "15m"),
    ],
)
case(
    "A gauge left at 95% by yesterday's calls on worker-b, with no spend there since: quiet once the hour passes.",
    [
        series(budget("acme", "day", "hard", JOBB), "0.95x200"),
        series(spend("acme", JOBB), "0+1x10 10x190"),
        series(budget("acme", "day", "hard"), "0.2x200"),
        series(spend("acme"), "0+0.1x200"),
    ],
    [
        fires(
            "AgentStepsTenantBudgetNearlySpent",
            "8m",
            {"severity": "warning", "tenant": "acme", "period": "day", "limit": "hard"},
            "Tenant acme has used 95% of its day hard budget",
        ),
        quiet("AgentStepsTenantBudgetNearlySpent", "90m"),
    ],
)
case(
    "Tenant acme reaches its month hard budget; beta is past its soft limit only (degraded, not stopped).",
    [
        series(budget("acme", "month", "hard"), "0.9 0.95 0.98 0.99 1 1.02x20"),
        series(spend("acme"), "0+2x25"),
        series(budget("beta", "day", "soft"), "1.2x25"),
        series(budget("beta", "day", "hard"), "0.6x25"),
        series(spend("beta"), "0+1x25"),
    ],
    [
        quiet("AgentStepsTenantBudgetSpent", "3m"),
        fires(
            "AgentStepsTenantBudgetSpent",
            "10m",
            {"severity": "critical", "tenant": "acme", "period": "month"},
            "Tenant acme has spent its month hard budget (102%)",
        ),
    ],
)
case(
    "A tenant stopped at its hard limit long ago, with no spend for over an hour: the stale gauge stays quiet.",
    [series(budget("acme", "day", "hard"), "1x200"), series(spend("acme"), "0+1x5 5x195")],
    [quiet("AgentStepsTenantBudgetSpent", "90m")],
)
case(
    "Quota gpt4o is 97% used while it keeps granting calls; quota claude sits at half.",
    [
        series(quota_series("agentsteps_quota_utilization_ratio", "gpt4o"), "0.97x30"),
        series(quota_series("agentsteps_quota_reserved_tokens_total", "gpt4o"), "0+1000x30"),
        series(quota_series("agentsteps_quota_utilization_ratio", "claude"), "0.5x30"),
        series(quota_series("agentsteps_quota_reserved_tokens_total", "claude"), "0+500x30"),
    ],
    [
        quiet("AgentStepsQuotaSaturated", "5m"),
        fires(
            "AgentStepsQuotaSaturated",
            "20m",
            {"severity": "warning", "quota": "gpt4o"},
            "Provider quota gpt4o is 97% used",
        ),
    ],
)
case(
    "A burst near the quota for 5 minutes, and a gauge left at 99% by a worker that granted nothing since.",
    [
        series(quota_series("agentsteps_quota_utilization_ratio", "gpt4o"), "0.97x5 0.6x25"),
        series(quota_series("agentsteps_quota_reserved_tokens_total", "gpt4o"), "0+1000x30"),
        series(quota_series("agentsteps_quota_utilization_ratio", "claude", JOBB), "0.99x30"),
        series(quota_series("agentsteps_quota_reserved_tokens_total", "claude", JOBB), "5000x30"),
    ],
    [quiet("AgentStepsQuotaSaturated", "20m")],
)


def render() -> str:
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
