"""The ``llm.call`` activity: precondition, one provider call, postcondition.

Transport failures raise (Temporal retries them, honouring Retry-After);
postcondition violations come back as values in ``LLMResponse.violations``
for the workflow to re-prompt or degrade.
"""

from __future__ import annotations

import time
from datetime import timedelta

import httpx2
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..contracts.config.settings import PriceTable, ProviderSettings
from ..contracts.errors import NonRetryableProviderError, RetryableProviderError
from ..contracts.llm.request import LLMRequest, LLMResponse
from ..contracts.names import LLM_CALL
from ..contracts.llm.call_ids import with_engine_call_ids
from ..contracts.llm.capabilities import check_capabilities
from ..contracts.llm.postconditions import check_response
from ..contracts.llm.preconditions import check_request
from ..contracts.llm.violations import Violation, ViolationKind
from ..telemetry.tracing import llm_span
from . import llm_metrics as metrics
from .providers.registry import ProviderSet



def _precondition_failure(violations: list[Violation]) -> ApplicationError:
    # The violations also travel as details so the workflow can report kind and path.
    summary = "; ".join(v.for_model() for v in violations)
    details = [v.model_dump(mode="json") for v in violations]
    if any(v.kind is ViolationKind.token_budget for v in violations):
        # A spent budget is the run's limit, not a broken contract: it fails as the run's budget does.
        return ApplicationError(
            f"llm.call precondition failed: {summary}", details, type="BudgetExceededError", non_retryable=True
        )
    return ApplicationError(
        f"llm.call precondition failed: {summary}", details, type="ContractViolationError", non_retryable=True
    )


class LLMActivities:
    def __init__(self, settings: ProviderSettings, http: httpx2.AsyncClient, prices: PriceTable | None = None) -> None:
        self._providers = ProviderSet(settings, http)
        self._prices = prices or PriceTable()

    @activity.defn(name=LLM_CALL)
    async def call(self, request: LLMRequest) -> LLMResponse:
        config = request.config
        # The capability table is the worker's, so this part of the precondition is checked here.
        pre = check_request(request) or check_capabilities(
            request, self._providers.capability(config.provider, config.model))
        metrics.record_checks("pre", pre)
        if pre:
            metrics.record_outcome(config, "precondition")
            raise _precondition_failure(pre)

        try:
            provider = self._providers.get(config.provider)
            started = time.perf_counter()
            with llm_span(
                config.provider, config.model, temperature=config.temperature, max_tokens=config.max_tokens
            ) as span:
                span.record_input(request.messages)
                try:
                    response = await provider.complete(request)
                finally:
                    metrics.record_latency(config, time.perf_counter() - started)
                span.record_response(
                    input_tokens=response.usage.prompt_tokens,
                    output_tokens=response.usage.completion_tokens,
                    finish_reasons=[response.finish_reason],
                    response_model=response.model,
                    output_messages=[response.message],
                )
        except RetryableProviderError as exc:
            metrics.record_outcome(config, "retryable_error")
            delay = None if exc.retry_after is None else timedelta(seconds=exc.retry_after)
            raise ApplicationError(str(exc), type="RetryableProviderError", next_retry_delay=delay) from exc
        except NonRetryableProviderError as exc:
            metrics.record_outcome(config, "fatal_error")
            raise ApplicationError(str(exc), type="NonRetryableProviderError", non_retryable=True) from exc

        # Before the postcondition, so it and everything after see one id per call in the run.
        response = response.model_copy(update={"message": with_engine_call_ids(response.message, request.messages)})
        post = check_response(request, response)
        metrics.record_checks("post", post)
        metrics.record_usage(config, response.usage, self._prices)
        metrics.record_outcome(config, "violation" if post else "ok")
        return response.model_copy(update={"violations": list(post)})
