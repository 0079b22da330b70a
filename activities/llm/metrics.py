"""Metrics of the ``llm.call`` activity, recorded once per attempt.

Activities may use prometheus directly: an activity attempt runs once, unlike
workflow code that replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ...contracts.config.settings import PriceTable
from ...contracts.llm.request import LLMConfig, Usage
from ...contracts.names import LLM_CALL
from ...contracts.violations import Violation
from ...telemetry.labels import MODELS
from ...telemetry.metrics import (
    CONTEXT_ACTIONS,
    CONTRACT_CHECKS,
    CONTRACT_VIOLATIONS,
    LLM_COST_USD,
    LLM_REQUEST_SECONDS,
    LLM_REQUESTS,
    LLM_TOKENS,
)

CONTRACT = LLM_CALL
"""The LLM contract is named after the activity that enforces it."""
Outcome = Literal["ok", "violation", "retryable_error", "fatal_error", "precondition"]


def cost_usd(prices: PriceTable, model: str, usage: Usage) -> float:
    """Unknown models cost 0: the price table is the operator's, not guessed here.

    Cache reads and writes are parts of the prompt priced on their own when the
    table has a price for them, else at the full input price.
    """
    usage = usage.billable()
    per_in = prices.input_per_mtok.get(model, 0.0)
    per_read = prices.cached_input_per_mtok.get(model, per_in)
    per_write = prices.cache_write_per_mtok.get(model, per_in)
    read, write = usage.cache_read_tokens, min(usage.cache_write_tokens, usage.prompt_tokens - usage.cache_read_tokens)
    fresh = usage.prompt_tokens - read - write
    per_out = prices.output_per_mtok.get(model, 0.0)
    return (fresh * per_in + read * per_read + write * per_write + usage.completion_tokens * per_out) / 1_000_000


def record_checks(phase: Literal["pre", "post"], violations: Sequence[Violation]) -> None:
    """One check; a failed one counts one violation (its first kind), under the check's own contract.

    The same rule as ``workflow_metrics.record_check``, so violations / checks
    stays within [0, 1] per contract on every path.
    """
    CONTRACT_CHECKS.labels(CONTRACT, phase, "fail" if violations else "pass").inc()
    if violations:
        CONTRACT_VIOLATIONS.labels(CONTRACT, phase, violations[0].kind.value).inc()


_SERVED: frozenset[Outcome] = frozenset({"ok", "violation", "retryable_error"})
"""Outcomes after which the model may become a label: the provider answered it, or is overloaded or down
(429, 5xx: the per-model error ratio must show them). A 4xx or a failed precondition never admits one."""


def model_label(config: LLMConfig, served: bool) -> str:
    """The spec names the model: a served one may become a label (bounded), a rejected one is ``other``
    unless the operator priced it."""
    return MODELS.admit(config.model) if served else MODELS.known(config.model)


def record_outcome(config: LLMConfig, outcome: Outcome) -> None:
    LLM_REQUESTS.labels(config.provider, model_label(config, outcome in _SERVED), outcome).inc()


def record_latency(config: LLMConfig, seconds: float, trace_id: str | None = None, *, served: bool = True) -> None:
    """With a trace id, the observation carries it as an exemplar (OpenMetrics scrapes show it),
    so a slow bucket on the dashboard links to the ``chat {model}`` span that was slow."""
    exemplar = {"trace_id": trace_id} if trace_id else None
    LLM_REQUEST_SECONDS.labels(config.provider, model_label(config, served)).observe(seconds, exemplar=exemplar)


def record_usage(config: LLMConfig, usage: Usage, prices: PriceTable) -> None:
    model = model_label(config, served=True)
    # Negative counts are a postcondition violation; a counter must not go down.
    LLM_TOKENS.labels(config.provider, model, "input").inc(max(0, usage.prompt_tokens))
    LLM_TOKENS.labels(config.provider, model, "output").inc(max(0, usage.completion_tokens))
    # Parts of input/output above, so a dashboard can show the cache hit rate and the thinking share.
    LLM_TOKENS.labels(config.provider, model, "cache_read").inc(max(0, usage.cache_read_tokens))
    LLM_TOKENS.labels(config.provider, model, "cache_write").inc(max(0, usage.cache_write_tokens))
    LLM_TOKENS.labels(config.provider, model, "reasoning").inc(max(0, usage.reasoning_tokens))
    # Always touched, so an unpriced model shows on the cost panel as 0, not as missing.
    LLM_COST_USD.labels(config.provider, model).inc(cost_usd(prices, config.model, usage))


def record_context_action(action: Literal["truncated", "summarized"]) -> None:
    CONTEXT_ACTIONS.labels(action).inc()
