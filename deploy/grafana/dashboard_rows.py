"""The dashboard's rows below the golden signals and error ratios (build_dashboard.py puts them in order)."""

from __future__ import annotations

from dashboard_kit import (
    INFO,
    LLM,
    POLLING_WORKERS,
    TOOL,
    WORKER,
    Link,
    PanelModel,
    panel,
    quantile,
    rate,
    ratio,
    row,
    temporal_ui_link,
    value,
    worse_above,
    worse_below,
)

RUNS_OF_SERIES_TYPE = "WorkflowType%3D%22${__field.labels.workflow_type}%22"
RPC = WORKER + ', namespace=~"$namespace"'
"""RPC metrics carry a namespace but no task queue."""


def drill_down(status: str = "") -> list[Link]:
    query = RUNS_OF_SERIES_TYPE + (f"%20AND%20ExecutionStatus%3D%22{status}%22" if status else "")
    return [
        temporal_ui_link(
            "Runs of ${__field.labels.workflow_type} in the Temporal UI", "${__field.labels.namespace}", query
        )
    ]


def llm() -> list[PanelModel]:
    bucket = rate("agentsteps_llm_request_seconds_bucket", LLM, temporal=False)
    return [
        row("LLM: tokens, cost, latency"),
        panel(
            "Tokens per second by model",
            "Tokens the provider reported, by direction (cache_read, cache_write "
            "and reasoning are parts of input and output).",
            [f"sum by (provider, model, direction) ({rate('agentsteps_llm_tokens_total', LLM, temporal=False)})"],
            unit="short",
        ),
        panel(
            "Estimated cost per hour by model (USD)",
            "USD per hour from the [worker.prices] table.",
            [f"sum by (provider, model) ({rate('agentsteps_llm_cost_usd_total', LLM, temporal=False)}) * 3600"],
            unit="currencyUSD",
            steps=worse_above(20, 100),
        ),
        panel(
            "LLM requests by outcome",
            "Calls per second: ok, violation (answered but broke the contract), "
            "retryable_error, fatal_error, precondition.",
            [f"sum by (model, outcome) ({rate('agentsteps_llm_requests_total', LLM, temporal=False)})"],
            unit="reqps",
        ),
        panel(
            "LLM request latency p50 / p95 / p99",
            "Provider request latency per model.",
            [(quantile(q, bucket, "model"), f"{{{{model}}}} p{int(q * 100)}") for q in (0.5, 0.95, 0.99)],
            unit="s",
            steps=worse_above(10, 30),
        ),
    ]


def contracts() -> list[PanelModel]:
    checks = rate("agentsteps_contract_checks_total", temporal=False)
    return [
        row("Contracts"),
        panel(
            "Contract-failure rate (violations / checks)",
            "Failed checks of all checks, per contract and phase "
            "(a failed check counts once, however many violations it had).",
            [ratio(rate("agentsteps_contract_violations_total", temporal=False), checks, "contract, phase")],
            unit="percentunit",
            steps=worse_above(0.1, 0.25),
        ),
        panel(
            "Violations by contract and kind",
            "Failed checks per second, by the kind of their first violation.",
            [f"sum by (contract, kind) ({rate('agentsteps_contract_violations_total', temporal=False)})"],
            unit="ops",
        ),
        panel(
            "Re-prompts by contract and kind",
            "Re-prompts the violation ladder sent.",
            [f"sum by (contract, kind) ({rate('agentsteps_reprompts_total')})"],
            unit="ops",
        ),
        panel(
            "Degradations by reason",
            "Fallback models and default results taken after the re-prompt budget.",
            [f"sum by (reason, target) ({rate('agentsteps_degradations_total')})"],
            unit="ops",
        ),
    ]


def tools() -> list[PanelModel]:
    calls = rate("agentsteps_tool_calls_total", TOOL, temporal=False)
    return [
        row("Tools"),
        panel(
            "Tool success rate",
            "ok of all calls per tool (0 when a tool never succeeded).",
            [ratio(rate("agentsteps_tool_calls_total", TOOL, 'outcome="ok"', temporal=False), calls, "tool")],
            unit="percentunit",
            steps=worse_below(0.8, 0.95),
        ),
        panel(
            "Tool calls by outcome",
            "Calls per second: ok, error (the tool refused), infra_error (unreachable).",
            [f"sum by (tool, outcome) ({calls})"],
            unit="ops",
        ),
        panel(
            "Tool latency p50 / p95 / p99",
            "Tool call latency per tool.",
            [
                (
                    quantile(q, rate("agentsteps_tool_call_seconds_bucket", TOOL, temporal=False), "tool"),
                    f"{{{{tool}}}} p{int(q * 100)}",
                )
                for q in (0.5, 0.95, 0.99)
            ],
            unit="s",
            steps=worse_above(5, 30),
        ),
        panel(
            "Model calls carried by tool calls",
            "A tool-mode step's next model call, made inside its only tool call's activity: answered there, or "
            "left to the run's own llm.call (not_made: too little time left; failed: the call failed there). "
            "Each one left costs one more activity; a rising failed share is a provider in trouble.",
            [(f"sum by (outcome) ({rate('agentsteps_next_model_calls_total', temporal=False)})", "{{outcome}}")],
            unit="ops",
        ),
    ]


MCP = 'server=~"$mcp_server"'


def mcp() -> list[PanelModel]:
    calls = rate("agentsteps_mcp_calls_total", MCP, temporal=False)
    return [
        row("MCP servers"),
        panel(
            "MCP servers up",
            "1 when the server is up on every selected worker; 0 when it is down, "
            "misconfigured or its circuit is open on any of them. Runs using its tools fail typed; other runs "
            "are untouched.",
            [(f"min by (server) ({value('agentsteps_mcp_server_up', MCP, temporal=False)})", "{{server}}")],
            unit="short",
            steps=worse_below(1, 1),
            width=4,
        ),
        panel(
            "MCP error ratio by server",
            "Calls that did not succeed (error, infra_error, timeout, circuit_open) of all calls, per server.",
            [ratio(rate("agentsteps_mcp_calls_total", MCP, 'outcome!="ok"', temporal=False), calls, "server")],
            unit="percentunit",
            steps=worse_above(0.05, 0.2),
            width=5,
        ),
        panel(
            "MCP calls by outcome",
            "Calls per second: ok, error (the tool's own error result), infra_error "
            "(unreachable, lost, malformed), timeout, circuit_open (refused by the breaker).",
            [(f"sum by (server, outcome) ({calls})", "{{server}} {{outcome}}")],
            unit="ops",
            width=5,
        ),
        panel(
            "MCP call latency p95",
            "95th percentile latency of calls that reached the server.",
            [(quantile(0.95, rate("agentsteps_mcp_call_seconds_bucket", MCP, temporal=False), "server"), "{{server}}")],
            unit="s",
            steps=worse_above(5, 30),
            width=5,
        ),
        panel(
            "MCP reconnects",
            "Sessions re-established per second after the first (a restarted stdio child, "
            "a new HTTP session). Steady reconnects: the server keeps dropping its sessions.",
            [(f"sum by (server) ({rate('agentsteps_mcp_reconnects_total', MCP, temporal=False)})", "{{server}}")],
            unit="ops",
            steps=worse_above(0.01, 0.1),
            width=5,
        ),
    ]


def worker_processes() -> list[PanelModel]:
    gib = 1024**3
    return [
        row("Worker processes"),
        panel(
            "Configured capacity",
            "What each worker was sized to at start (from the pod's resources or its "
            "settings): activity and workflow-task slots, cached workflows, sandbox processes. Compare with the "
            "slot panels under Temporal worker health.",
            [
                (
                    f"sum by (instance, kind) ({value('agentsteps_worker_slots', temporal=False)})",
                    "{{instance}} {{kind}}",
                )
            ],
            unit="short",
            width=6,
        ),
        panel(
            "CPU per worker",
            "CPU seconds per second (1 = one core). Near the pod's limit, schedule-to-start "
            "latency climbs: add workers before raising slots.",
            [(f"sum by (instance) ({rate('process_cpu_seconds_total', temporal=False)})", "{{instance}}")],
            unit="percentunit",
            steps=worse_above(0.8, 0.95),
            width=6,
        ),
        panel(
            "Resident memory per worker",
            "Resident set size. Thresholds assume the shipped 1 GiB limit: a "
            "worker over it is OOM-killed, and its running activities are retried elsewhere.",
            [(f"sum by (instance) ({value('process_resident_memory_bytes', temporal=False)})", "{{instance}}")],
            unit="bytes",
            steps=worse_above(0.8 * gib, 0.95 * gib),
            width=6,
        ),
        panel(
            "Open file descriptors",
            "Open of allowed file descriptors. Leaked MCP or HTTP connections show here first.",
            [
                (
                    f"sum by (instance) ({value('process_open_fds', temporal=False)}) / sum by "
                    f"(instance) ({value('process_max_fds', temporal=False)})",
                    "{{instance}}",
                )
            ],
            unit="percentunit",
            steps=worse_above(0.5, 0.8),
            width=6,
        ),
        panel(
            "Payload store growth",
            "Bytes the workers write to (put) and read from (get) the payload store per second. What is written "
            "stays until agentsteps payloads gc collects what closed sessions left: the store's growth.",
            [(f"sum by (op) ({rate('agentsteps_payload_store_bytes_total', temporal=False)})", "{{op}}")],
            unit="Bps",
            width=12,
        ),
        panel(
            "Payload store requests by op",
            "Requests per second as S3 bills them: put and reference (an in-place copy) are PUT-class, get is "
            "GET-class. S3 takes about 3,500 PUT-class requests a second per key prefix.",
            [(f"sum by (op) ({rate('agentsteps_payload_store_requests_total', temporal=False)})", "{{op}}")],
            unit="reqps",
            steps=worse_above(2500, 3500),
            width=12,
        ),
    ]


def runs() -> list[PanelModel]:
    return [
        row("Agent runs and steps"),
        panel(
            "Run end-to-end latency p50 / p95 / p99",
            "Workflow time from start to finish.",
            [(quantile(q, rate("agentsteps_agent_run_seconds_bucket")), f"p{int(q * 100)}") for q in (0.5, 0.95, 0.99)],
            unit="s",
            steps=worse_above(120, 300),
        ),
        panel(
            "Step latency p50 / p95 / p99",
            "One LLM call plus the tool calls it asked for, per mode.",
            [
                (quantile(q, rate("agentsteps_agent_step_seconds_bucket"), "mode"), f"{{{{mode}}}} p{int(q * 100)}")
                for q in (0.5, 0.95, 0.99)
            ],
            unit="s",
            steps=worse_above(30, 120),
        ),
        panel(
            "Runs by outcome",
            "Runs finished per second, by outcome and workflow type. Click a series for its runs in the Temporal UI.",
            [
                (
                    f"sum by (namespace, workflow_type, outcome) ({rate('agentsteps_agent_runs_total')})",
                    "{{workflow_type}} {{outcome}}",
                )
            ],
            unit="ops",
            data_links=drill_down(),
        ),
        panel(
            "Steps per run (mean)",
            "Average steps a finished run took.",
            [
                f"sum({rate('agentsteps_agent_steps_per_run_sum')}) / "
                f"sum({rate('agentsteps_agent_steps_per_run_count')})"
            ],
            unit="short",
            steps=worse_above(20, 50),
        ),
        panel(
            "Steps per run p95",
            "95th percentile of steps per run.",
            [quantile(0.95, rate("agentsteps_agent_steps_per_run_bucket"))],
            unit="short",
            steps=worse_above(20, 50),
        ),
    ]


def code_and_monitor() -> list[PanelModel]:
    return [
        row("Code mode"),
        panel(
            "Programs by outcome",
            "Code-mode programs finished: completed or the error kind.",
            [f"sum by (outcome) ({rate('agentsteps_code_programs_total', temporal=False)})"],
            unit="ops",
        ),
        panel(
            "Program resumes by source",
            "Where each paused program's next segment came from: kept live on the worker, carried by its call's "
            "activity, rebuilt by replay, or a stored snapshot. Rising replay means workers lose their live "
            "programs (restarts, evictions, more workers than the cache holds).",
            [(f"sum by (source) ({rate('agentsteps_code_resumes_total', temporal=False)})", "{{source}}")],
            unit="ops",
        ),
        panel(
            "Payload store refusals",
            "Reads the payload store refused a worker (AccessDenied, bad "
            "credentials), by pod: that pod's attempts fail and are retried; any value is a pod to fix.",
            [(f"sum by (instance) ({rate('agentsteps_payload_store_denied_total', temporal=False)})", "{{instance}}")],
            unit="ops",
            steps=worse_above(0.0001, 0.01),
        ),
        panel(
            "Malformed starts and signals",
            "Starts failed at once (InvalidSpecError) and signals dropped for a wrongly shaped argument, by "
            "workflow type and entry: a caller to fix, never a run left retrying.",
            [
                (
                    f"sum by (workflow_type, kind, name) ({rate('agentsteps_malformed_inputs_total')})",
                    "{{workflow_type}} {{kind}} {{name}}",
                )
            ],
            unit="ops",
            steps=worse_above(0.0001, 0.01),
        ),
        panel(
            "Sandbox execution time p50 / p95 / p99",
            "Time programs spent executing in the Monty sandbox.",
            [
                (quantile(q, rate("agentsteps_code_sandbox_seconds_bucket", temporal=False)), f"p{int(q * 100)}")
                for q in (0.5, 0.95, 0.99)
            ],
            unit="s",
            steps=worse_above(10, 60),
        ),
        row("Monitor"),
        panel(
            "Stalled tickets",
            "Stalled tickets found by each monitor's latest tick, whichever worker ran it "
            "(each worker keeps the value of the last tick it ran; the newest tick timestamp picks the worker).",
            [stalled_tickets()],
            unit="short",
            steps=worse_above(10, 50),
        ),
        panel(
            "Nudges and escalations",
            "Nudges posted and tickets escalated per second.",
            [
                (f"sum by (monitor) ({rate('agentsteps_monitor_nudges_total', temporal=False)})", "{{monitor}} nudges"),
                (
                    f"sum by (monitor) ({rate('agentsteps_monitor_escalations_total', temporal=False)})",
                    "{{monitor}} escalations",
                ),
            ],
            unit="ops",
        ),
        panel(
            "Last monitor tick",
            "When each monitor last recorded a tick, on any worker. A schedule that stopped firing shows here first.",
            [
                "max by (monitor) ("
                + value("agentsteps_monitor_last_tick_timestamp_seconds", temporal=False)
                + ") * 1000"
            ],
            unit="dateTimeFromNow",
            steps=INFO,
        ),
    ]


def stalled_tickets() -> str:
    """The stalled count from the worker whose tick is the newest, per monitor (issue 14 item 5)."""
    stamp = value("agentsteps_monitor_last_tick_timestamp_seconds", temporal=False)
    newest = f"({stamp} == on (monitor) group_left () max by (monitor) ({stamp}))"
    stalled = value("agentsteps_monitor_stalled_tickets", temporal=False)
    return f"max by (monitor) ({stalled} and on (job, instance, monitor) {newest})"


def temporal_health() -> list[PanelModel]:
    used, free = value("temporal_worker_task_slots_used"), value("temporal_worker_task_slots_available")
    hit, miss = rate("temporal_sticky_cache_hit_total"), rate("temporal_sticky_cache_miss_total")
    rebuilds = rate("agentsteps_workflow_replay_seconds_count", temporal=False)
    return [
        row("Temporal worker health"),
        panel(
            "Task slot utilisation",
            "Slots in use of all slots, per worker type. Near 100% means tasks wait "
            "for a slot: add workers or raise the slot limits.",
            [
                (
                    f"sum by (worker_type) ({used}) / (sum by (worker_type) ({used}) + sum by (worker_type) ({free}))",
                    "{{worker_type}}",
                )
            ],
            unit="percentunit",
            steps=worse_above(0.8, 0.95),
        ),
        panel(
            "Task slots used / available",
            "Slots in use and free, per worker type.",
            [
                (f"sum by (worker_type) ({used})", "{{worker_type}} used"),
                (f"sum by (worker_type) ({free})", "{{worker_type}} available"),
            ],
            unit="short",
        ),
        panel(
            "Schedule-to-start latency p95",
            "Task wait in the task queue. Rising with full slots: add workers.",
            [
                (
                    quantile(
                        0.95, rate("temporal_workflow_task_schedule_to_start_latency_seconds_bucket"), "task_queue"
                    ),
                    "{{task_queue}} workflow",
                ),
                (
                    quantile(0.95, rate("temporal_activity_schedule_to_start_latency_seconds_bucket"), "task_queue"),
                    "{{task_queue}} activity",
                ),
            ],
            unit="s",
            steps=worse_above(1, 5),
        ),
        panel(
            "Pollers",
            "Long polls the workers hold open, by poller type. 0 on a task queue means nothing picks its tasks.",
            [(f"sum by (task_queue, poller_type) ({value('temporal_num_pollers')})", "{{task_queue}} {{poller_type}}")],
            unit="short",
            steps=worse_below(1, 1),
        ),
        panel(
            "Polls: with a task / empty",
            "Workflow polls that brought a task, and polls that expired empty "
            "(workflow and activity). Mostly empty polls mean spare capacity.",
            [
                (f"sum({rate('temporal_workflow_task_queue_poll_succeed_total')})", "workflow with task"),
                (f"sum({rate('temporal_workflow_task_queue_poll_empty_total')})", "workflow empty"),
                (f"sum({rate('temporal_activity_poll_no_task_total')})", "activity empty"),
            ],
            unit="ops",
        ),
        panel(
            "Sticky cache hit ratio",
            "Workflow tasks served from the worker's cache, of cached and missed. "
            "Misses replay the whole history: low means the cache is too small for the running workflows.",
            [f"sum({hit}) / (sum({hit}) + (sum({miss}) or vector(0)))"],
            unit="percentunit",
            steps=worse_below(0.8, 0.95),
        ),
        panel(
            "Sticky cache size, misses and forced evictions",
            "Cached workflows, misses per second and evictions forced by a full cache or a failed task.",
            [
                (f"sum by (task_queue) ({value('temporal_sticky_cache_size')})", "{{task_queue}} size"),
                (f"sum({miss})", "misses"),
                (f"sum({rate('temporal_sticky_cache_total_forced_eviction_total')})", "forced evictions"),
            ],
            unit="short",
        ),
        panel(
            "Replay time p50 / p95",
            "Time a worker spent re-running workflow code over a run's history to rebuild a run it did not cache "
            "(a sticky-cache miss, a task from the normal queue). Grows with the history since the run's last "
            "continue-as-new; a session's turn waits for it.",
            [
                (quantile(q, rate("agentsteps_workflow_replay_seconds_bucket", temporal=False)), f"p{int(q * 100)}")
                for q in (0.5, 0.95)
            ],
            unit="s",
            steps=worse_above(0.5, 1),
        ),
        panel(
            "Rebuilds: cache misses / sticky-queue timeouts",
            "Runs rebuilt from history per second: after a sticky-cache miss, and the rest, which came with their "
            "whole history from the normal queue (a sticky task no worker took within 10 s, a restarted worker).",
            [
                (f"sum({rebuilds})", "rebuilds"),
                (f"sum({miss}) or vector(0)", "cache misses"),
                (f"clamp_min(sum({rebuilds}) - (sum({miss}) or vector(0)), 0)", "not misses: sticky-queue timeouts"),
            ],
            unit="ops",
        ),
        panel(
            "Temporal RPC failures",
            "Failed calls from the worker to the Temporal service, by operation and "
            "status code. Sustained failures: the service or the network is unhealthy.",
            [
                (
                    f"sum by (operation, status_code) (rate(temporal_request_failure_total{{{RPC}}}"
                    f"[$__rate_interval]) and on (job, instance) {POLLING_WORKERS})",
                    "{{operation}} {{status_code}}",
                )
            ],
            unit="ops",
            steps=worse_above(0.1, 1),
        ),
        panel(
            "Temporal RPC latency p95",
            "Worker to Temporal service request latency, by operation.",
            [
                (
                    quantile(
                        0.95,
                        f"rate(temporal_request_latency_seconds_bucket{{{RPC}}}[$__rate_interval]) "
                        f"and on (job, instance) {POLLING_WORKERS}",
                        "operation",
                    ),
                    "{{operation}}",
                )
            ],
            unit="s",
            steps=worse_above(0.5, 2),
        ),
        panel(
            "Workflow task failures",
            "Failed workflow tasks (a bug or non-determinism): the run is stuck until "
            "the code is fixed. Click a series for its runs.",
            [
                (
                    f"sum by (namespace, workflow_type, failure_reason) "
                    f"({rate('temporal_workflow_task_execution_failed_total')})",
                    "{{workflow_type}} {{failure_reason}}",
                )
            ],
            unit="ops",
            steps=worse_above(0.001, 0.01),
            data_links=drill_down(),
        ),
        panel(
            "Activity failures",
            "Failed activity attempts (Temporal retries them).",
            [(f"sum by (activity_type) ({rate('temporal_activity_execution_failed_total')})", "{{activity_type}}")],
            unit="ops",
            steps=worse_above(0.1, 1),
        ),
        panel(
            "Activity execution latency p95",
            "Activity attempt latency by activity type.",
            [
                (
                    quantile(0.95, rate("temporal_activity_execution_latency_seconds_bucket"), "activity_type"),
                    "{{activity_type}}",
                )
            ],
            unit="s",
            steps=worse_above(30, 120),
        ),
    ]


def sessions() -> list[PanelModel]:
    started, ended = value("agentsteps_sessions_started_total"), value("agentsteps_sessions_ended_total")
    return [
        row("Sessions"),
        panel(
            "Active sessions",
            "Sessions started minus sessions ended.",
            [f"sum({started}) - (sum({ended}) or vector(0))"],
            unit="short",
        ),
        panel(
            "Session turns by outcome",
            "Turns finished per second.",
            [f"sum by (outcome) ({rate('agentsteps_session_turns_total')})"],
            unit="ops",
        ),
        panel(
            "Turn latency p50 / p95",
            "Turn latency in workflow time, approvals included.",
            [(quantile(q, rate("agentsteps_session_turn_seconds_bucket")), f"p{int(q * 100)}") for q in (0.5, 0.95)],
            unit="s",
            steps=worse_above(60, 300),
        ),
        panel(
            "Approvals by outcome",
            "Approvals decided, and tool calls that asked for one.",
            [
                (f"sum by (outcome) ({rate('agentsteps_approvals_total')})", "{{outcome}}"),
                (f"sum by (tool) ({rate('agentsteps_approvals_requested_total', TOOL)})", "{{tool}} requested"),
            ],
            unit="ops",
        ),
        panel(
            "Approval wait p95",
            "How long a tool call waited for a person's decision.",
            [quantile(0.95, rate("agentsteps_approval_wait_seconds_bucket"))],
            unit="s",
            steps=worse_above(3600, 14400),
        ),
        panel(
            "Continue-as-new and context-policy actions",
            "Sessions that continued-as-new, and requests a context policy compacted.",
            [
                (f"sum({rate('agentsteps_session_continued_as_new_total')})", "continued as new"),
                (f"sum by (action) ({rate('agentsteps_context_actions_total', temporal=False)})", "{{action}}"),
            ],
            unit="ops",
        ),
    ]


QUOTA = 'quota=~"$quota"'
TENANT = 'tenant=~"$tenant"'
RECORDED_WITH = "on (job, instance, namespace, task_queue, workflow_type, quota)"
"""A utilization gauge and the grant counter beside it carry the same series labels (one grant records both)."""


def quotas_and_budgets() -> list[PanelModel]:
    reserved = rate("agentsteps_quota_reserved_tokens_total", QUOTA)
    # A workflow-side gauge stays at its last value on every worker that ever set it: only the
    # workers that granted calls of the quota within the window say how full it is now.
    utilization = (
        f"max by (quota) ({value('agentsteps_quota_utilization_ratio', QUOTA)} and {RECORDED_WITH} {reserved} > 0)"
    )
    return [
        row("Quotas and budgets"),
        panel(
            "Quota utilization",
            "Share of each provider quota's binding per-minute limit in use, as its account "
            "told at the latest grant (workers that granted none in the window are left out). Near 100% calls "
            "queue for capacity instead of meeting a provider 429.",
            [(utilization, "{{quota}}")],
            unit="percentunit",
            steps=worse_above(0.8, 0.95),
            width=6,
        ),
        panel(
            "Quota waits and 429s per second",
            "Model calls that found no capacity and waited durably for "
            "their quota (no worker slot held; the run's state says waiting_for_quota), and provider 429s "
            "answered to calls the quota granted: each lowers the quota's effective limits until the "
            "provider recovers (agentsteps quota show).",
            [
                (f"sum by (quota) ({rate('agentsteps_quota_waits_total', QUOTA)})", "{{quota}} waits"),
                (f"sum by (quota) ({rate('agentsteps_quota_throttled_total', QUOTA)})", "{{quota}} 429s"),
            ],
            unit="ops",
            steps=worse_above(1, 10),
            width=6,
        ),
        panel(
            "Quota wait p95",
            "95th percentile of the time a model call waited for its quota's grant (0 for calls granted at once).",
            [(quantile(0.95, rate("agentsteps_quota_wait_seconds_bucket", QUOTA), "quota"), "{{quota}}")],
            unit="s",
            steps=worse_above(10, 60),
            width=6,
        ),
        panel(
            "Reserved vs actual tokens",
            "Tokens per second reserved before calls (prompt + max_tokens) and "
            "the tokens the same calls used. A wide gap: max_tokens is set far above what replies use, and the "
            "quota admits fewer calls than it could.",
            [
                (f"sum by (quota) ({reserved})", "{{quota}} reserved"),
                (f"sum by (quota) ({rate('agentsteps_quota_actual_tokens_total', QUOTA)})", "{{quota}} actual"),
            ],
            unit="short",
            width=6,
        ),
        panel(
            "Tenant budget used",
            "Share of each tenant's budget used (calls in flight included), per period "
            "(day, month) and limit: past soft the calls move to the tenant's cheaper model, at hard its runs "
            "stop with BudgetExceededError. Each worker keeps the value of the last call it reserved, so the "
            "highest is shown.",
            [
                (
                    f"max by (tenant, period, limit) ({value('agentsteps_tenant_budget_used_ratio', TENANT)})",
                    "{{tenant}} {{period}} {{limit}}",
                )
            ],
            unit="percentunit",
            steps=worse_above(0.8, 1),
            width=12,
        ),
        panel(
            "Tenant spend per hour (USD)",
            "USD per hour each tenant spends, priced from the [worker.prices] "
            "table (a tenant not in the config counts as other).",
            [(f"sum by (tenant) ({rate('agentsteps_tenant_spend_usd_total', TENANT)}) * 3600", "{{tenant}}")],
            unit="currencyUSD",
            steps=worse_above(20, 100),
            width=12,
        ),
    ]
