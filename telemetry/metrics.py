"""Every Prometheus metric the worker exports, defined once.

Activities record here; workflows record through ``telemetry.workflow_metrics``
(Temporal's replay-safe meter) so a replay never counts twice. Labels are
bounded: provider, model, tool, contract, kind, outcome. Never ids, never text.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_LATENCY_BUCKETS = LATENCY_BUCKETS

LLM_TOKENS = Counter(
    "agentsteps_llm_tokens", "LLM tokens by direction.", ["provider", "model", "direction"], registry=REGISTRY
)
LLM_COST_USD = Counter(
    "agentsteps_llm_cost_usd", "Estimated LLM cost from the configured price table.", ["provider", "model"],
    registry=REGISTRY,
)
LLM_REQUEST_SECONDS = Histogram(
    "agentsteps_llm_request_seconds", "LLM HTTP request latency.", ["provider", "model"],
    buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)
LLM_REQUESTS = Counter(
    "agentsteps_llm_requests", "LLM calls by outcome (ok, violation, retryable_error, fatal_error, precondition).",
    ["provider", "model", "outcome"], registry=REGISTRY,
)
CONTRACT_CHECKS = Counter(
    "agentsteps_contract_checks", "Contract checks by contract, phase and outcome (pass, fail).",
    ["contract", "phase", "outcome"], registry=REGISTRY,
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
CODE_PROGRAMS = Counter(
    "agentsteps_code_programs", "Code-mode programs by outcome.", ["outcome"], registry=REGISTRY
)
CODE_SANDBOX_SECONDS = Histogram(
    "agentsteps_code_sandbox_seconds", "Time spent executing programs in the sandbox.",
    buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)
MONITOR_STALLED_TICKETS = Gauge(
    "agentsteps_monitor_stalled_tickets", "Stalled tickets found by the last monitor tick.", ["monitor"],
    registry=REGISTRY,
)
MONITOR_NUDGES = Counter("agentsteps_monitor_nudges", "Nudges posted.", ["monitor"], registry=REGISTRY)
MONITOR_ESCALATIONS = Counter(
    "agentsteps_monitor_escalations", "Tickets escalated.", ["monitor"], registry=REGISTRY
)


def estimate_cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    input_per_mtok: Mapping[str, float],
    output_per_mtok: Mapping[str, float],
) -> float:
    """USD for one call from a per-million-token price table; a model missing from the table costs 0."""
    return (input_tokens * input_per_mtok.get(model, 0.0) + output_tokens * output_per_mtok.get(model, 0.0)) / 1e6


def record_llm_usage(provider: str, model: str, input_tokens: int, output_tokens: int, prices: object) -> float:
    """Count one call's tokens and its estimated cost; returns the cost.

    ``prices`` is a ``contracts.settings.PriceTable`` (anything with
    ``input_per_mtok`` and ``output_per_mtok`` mappings). The cost counter is
    touched even at 0 so a model without a price still shows up on the cost panel.
    """
    LLM_TOKENS.labels(provider, model, "input").inc(input_tokens)
    LLM_TOKENS.labels(provider, model, "output").inc(output_tokens)
    cost = estimate_cost_usd(
        model,
        input_tokens,
        output_tokens,
        input_per_mtok=getattr(prices, "input_per_mtok", {}),
        output_per_mtok=getattr(prices, "output_per_mtok", {}),
    )
    LLM_COST_USD.labels(provider, model).inc(cost)
    return cost


def record_contract_check(contract: str, phase: str, violation_kinds: list[str]) -> None:
    """One contract check: a pass, or a fail with one violation count per kind.

    Contract-failure rate on the dashboard is violations / checks, so both are
    recorded here together and can never drift apart.
    """
    CONTRACT_CHECKS.labels(contract, phase, "fail" if violation_kinds else "pass").inc()
    for kind in violation_kinds:
        CONTRACT_VIOLATIONS.labels(contract, phase, kind).inc()
