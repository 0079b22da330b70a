"""Every Prometheus metric the worker exports, defined once.

Activities record here; workflows record through ``telemetry.workflow_metrics``
(Temporal's replay-safe meter) so a replay never counts twice. Labels are
bounded: provider, model, tool, contract, kind, outcome. Never ids, never text.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

REGISTRY = CollectorRegistry(auto_describe=True)
# process_* (CPU seconds, resident memory, open fds, start time) of the worker process itself.
ProcessCollector(registry=REGISTRY)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_LATENCY_BUCKETS = LATENCY_BUCKETS

LLM_TOKENS = Counter(
    "agentsteps_llm_tokens", "LLM tokens by direction.", ["provider", "model", "direction"], registry=REGISTRY
)
LLM_COST_USD = Counter(
    "agentsteps_llm_cost_usd",
    "Estimated LLM cost from the configured price table.",
    ["provider", "model"],
    registry=REGISTRY,
)
LLM_REQUEST_SECONDS = Histogram(
    "agentsteps_llm_request_seconds",
    "LLM HTTP request latency.",
    ["provider", "model"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
LLM_REQUESTS = Counter(
    "agentsteps_llm_requests",
    "LLM calls by outcome (ok, violation, retryable_error, fatal_error, precondition).",
    ["provider", "model", "outcome"],
    registry=REGISTRY,
)
CONTRACT_CHECKS = Counter(
    "agentsteps_contract_checks",
    "Contract checks by contract, phase and outcome (pass, fail).",
    ["contract", "phase", "outcome"],
    registry=REGISTRY,
)
CONTRACT_VIOLATIONS = Counter(
    "agentsteps_contract_violations", "Contract violations by kind.", ["contract", "phase", "kind"], registry=REGISTRY
)
TOOL_CALLS = Counter(
    "agentsteps_tool_calls", "Tool calls by outcome (ok, error, infra_error).", ["tool", "outcome"], registry=REGISTRY
)
TOOL_CALL_SECONDS = Histogram(
    "agentsteps_tool_call_seconds", "Tool call latency.", ["tool"], buckets=_LATENCY_BUCKETS, registry=REGISTRY
)
NEXT_MODEL_CALLS = Counter(
    "agentsteps_next_model_calls",
    "Model calls a tool call carried, by outcome (answered, not_made, failed).",
    ["outcome"],
    registry=REGISTRY,
)
CODE_PROGRAMS = Counter("agentsteps_code_programs", "Code-mode programs by outcome.", ["outcome"], registry=REGISTRY)
CODE_RESUMES = Counter(
    "agentsteps_code_resumes",
    "Code-mode program resumes by where the paused program came from (live, replay, not_live, snapshot).",
    ["source"],
    registry=REGISTRY,
)
CODE_SANDBOX_SECONDS = Histogram(
    "agentsteps_code_sandbox_seconds",
    "Time spent executing programs in the sandbox.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
CONTEXT_ACTIONS = Counter(
    "agentsteps_context_actions",
    "Requests compacted by a context policy, by action (truncated, summarized).",
    ["action"],
    registry=REGISTRY,
)
MONITOR_STALLED_TICKETS = Gauge(
    "agentsteps_monitor_stalled_tickets",
    "Stalled tickets found by the last monitor tick.",
    ["monitor"],
    registry=REGISTRY,
)
MONITOR_LAST_TICK = Gauge(
    "agentsteps_monitor_last_tick_timestamp_seconds",
    "When the last monitor tick this worker recorded was scheduled to record (Unix time). Each worker keeps the "
    "stalled count of the last tick it ran; the newest timestamp says which worker's count is current.",
    ["monitor"],
    registry=REGISTRY,
)
MONITOR_NUDGES = Counter("agentsteps_monitor_nudges", "Nudges posted.", ["monitor"], registry=REGISTRY)
MONITOR_ESCALATIONS = Counter("agentsteps_monitor_escalations", "Tickets escalated.", ["monitor"], registry=REGISTRY)

# Per MCP server; ``server`` is a configured server name only (bounded), every series pre-created at start.
MCP_SERVER_UP = Gauge(
    "agentsteps_mcp_server_up",
    "1 when the MCP server is up; 0 when down, misconfigured or its circuit is open.",
    ["server"],
    registry=REGISTRY,
)
MCP_CALLS = Counter(
    "agentsteps_mcp_calls",
    "MCP tool calls by outcome (ok, error, infra_error, timeout, circuit_open).",
    ["server", "outcome"],
    registry=REGISTRY,
)
MCP_CALL_SECONDS = Histogram(
    "agentsteps_mcp_call_seconds", "MCP tool call latency.", ["server"], buckets=_LATENCY_BUCKETS, registry=REGISTRY
)
MCP_RECONNECTS = Counter(
    "agentsteps_mcp_reconnects",
    "Sessions to the MCP server re-established after the first.",
    ["server"],
    registry=REGISTRY,
)
MCP_CALL_OUTCOMES = ("ok", "error", "infra_error", "timeout", "circuit_open")

PAYLOAD_STORE_DENIED = Counter(
    "agentsteps_payload_store_denied",
    "Reads the payload store refused this worker (AccessDenied, bad credentials): the attempt is failed and "
    "retried, the run is left alone.",
    registry=REGISTRY,
)
PAYLOAD_STORE_REQUESTS = Counter(
    "agentsteps_payload_store_requests",
    "Requests this worker made to the payload store, by op (put, get, reference, list, head, delete).",
    ["op"],
    registry=REGISTRY,
)
PAYLOAD_STORE_BYTES = Counter(
    "agentsteps_payload_store_bytes",
    "Bytes this worker wrote to (op put) and read from (op get) the payload store.",
    ["op"],
    registry=REGISTRY,
)
PAYLOAD_STORE_OPS = ("put", "get", "reference", "list", "head", "delete")


def count_store_request(op: str, size: int) -> None:
    """A listener for ``storage.store_requests``: one request, and its bytes for put and get."""
    PAYLOAD_STORE_REQUESTS.labels(op).inc()
    if size and op in ("put", "get"):
        PAYLOAD_STORE_BYTES.labels(op).inc(size)


for _op in PAYLOAD_STORE_OPS:  # every series from worker start: no gap in rate()
    PAYLOAD_STORE_REQUESTS.labels(_op)
for _op in ("put", "get"):
    PAYLOAD_STORE_BYTES.labels(_op)

REPLAY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
"""A session's replay is milliseconds when its history is short, seconds when it nears continue_after_events."""
WORKFLOW_REPLAY_SECONDS = Histogram(
    "agentsteps_workflow_replay_seconds",
    "Time this worker spent re-running workflow code from history to rebuild a run it did not cache.",
    ["workflow_type"],
    buckets=REPLAY_BUCKETS,
    registry=REGISTRY,
)

WORKER_SLOTS = Gauge(
    "agentsteps_worker_slots",
    "The worker's configured capacity by kind (activity, workflow_task, cached_workflows, sandbox_processes).",
    ["kind"],
    registry=REGISTRY,
)
