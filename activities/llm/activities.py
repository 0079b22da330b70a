"""The ``llm.call`` activity: precondition, one provider call, postcondition.

Transport failures raise (Temporal retries them, honouring Retry-After);
postcondition violations come back as values in ``LLMResponse.violations``
for the workflow to re-prompt or degrade.
"""

from __future__ import annotations

import time

import httpx2
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ...contracts.config.settings import PriceTable, ProviderSettings
from ...contracts.errors import (
    BudgetExceededError,
    ContractViolationError,
    NonRetryableProviderError,
    RetryableProviderError,
)
from ...contracts.llm.conversation import ConversationRef
from ...contracts.llm import context
from ...contracts.llm.request import ContextAction, LLMRequest, LLMResponse
from ...contracts.names import LLM_CALL
from ...contracts.llm.call_ids import with_engine_call_ids
from ...contracts.llm.capabilities import check_capabilities
from ...contracts.llm.postconditions import check_response
from ...contracts.llm.preconditions import check_request
from ...contracts.violations import Violation, ViolationKind
from ...telemetry.labels import MODELS
from ...telemetry.tracing import llm_span
from ...failures import from_failure, to_application_error
from ...storage.conversations import ConversationStore
from . import metrics
from .providers.registry import ProviderSet
from .providers.streams import TextSink
from .token_stream import TokenPublisher



def _precondition_failure(violations: list[Violation]) -> ApplicationError:
    # The violations also travel as details so the workflow can report kind and path.
    message = "llm.call precondition failed: " + "; ".join(v.for_model() for v in violations)
    details = [v.model_dump(mode="json") for v in violations]
    if any(v.kind is ViolationKind.token_budget for v in violations):
        # A spent budget is the run's limit, not a broken contract: it fails as the run's budget does.
        return to_application_error(BudgetExceededError(message), details)
    return to_application_error(ContractViolationError.with_message(message), details)


class LLMActivities:
    def __init__(
        self,
        settings: ProviderSettings,
        http: httpx2.AsyncClient,
        prices: PriceTable | None = None,
        conversations: ConversationStore | None = None,
    ) -> None:
        self._providers = ProviderSet(settings, http)
        self._prices = prices or PriceTable()
        # Priced models are labels from the start, even when a provider rejects a call to one.
        MODELS.add_known([*self._prices.input_per_mtok, *self._prices.output_per_mtok])
        self._conversations = conversations

    @activity.defn(name=LLM_CALL)
    async def call(self, request: LLMRequest) -> LLMResponse:
        chained = request.chained or request.conversation is not None
        full = request
        if chained:
            earlier = await self._store().load(request.conversation)
            full = request.model_copy(
                update={"messages": [*earlier, *request.messages], "conversation": None, "chained": False}
            )
        action = None
        if request.context_policy != "none" and not context.fits(full):
            full, action = await self._compact(full)
        stored: ConversationRef | None = None
        if chained:
            # Stored before the provider call: a retry stores the same segment under the same address.
            # A compacted conversation starts a new chain, so later calls build on the compacted one.
            if action is None:
                stored = await self._store().extend(request.conversation, full.messages, request.messages)
            else:
                stored = await self._store().extend(None, full.messages, full.messages)
        if request.stream is None:
            response = await self._call(full)
        else:
            async with TokenPublisher(request.stream) as tokens:
                response = await self._call(full, on_text=tokens.add)
        return response.model_copy(update={"conversation": stored, "context": action})

    def _store(self) -> ConversationStore:
        if self._conversations is None:
            raise to_application_error(NonRetryableProviderError("this worker has no conversation store"))
        return self._conversations

    async def _compact(self, request: LLMRequest) -> tuple[LLMRequest, ContextAction]:
        """Apply the request's context policy; a summary that fails its contract falls back to truncation."""
        note = ""
        if request.context_policy == "summarize":
            system, _ = context.split_turns(request.messages)
            dropped, _ = context.keep_latest(request, system)
            if dropped:
                ask = context.summary_request(request, dropped, context.earlier_summary(request))
                try:
                    answer = await self._call(ask)
                except ApplicationError as exc:
                    if isinstance(from_failure(exc), RetryableProviderError):
                        raise
                    answer, note = None, f"summary failed ({exc.type}); truncated instead"
                if answer is not None and answer.violations:
                    note = "summary violated its contract; truncated instead: " + answer.violations[0].for_model()
                elif answer is not None:
                    compacted, count = context.summarized(request, context.parse_summary(answer.message.content))
                    metrics.record_context_action("summarized")
                    return compacted, ContextAction(
                        action="summarized", dropped_messages=count, usage=answer.usage.billable()
                    )
        compacted, action = context.truncated(request)
        metrics.record_context_action("truncated")
        action.note = note
        return compacted, action

    async def _call(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
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
                served = True
                try:
                    if on_text is None:
                        response = await provider.complete(request)
                    else:
                        response = await provider.stream(request, on_text)
                except BaseException as exc:
                    served = isinstance(exc, RetryableProviderError)  # the same rule as its outcome's label
                    raise
                finally:
                    metrics.record_latency(config, time.perf_counter() - started, span.trace_id, served=served)
                span.record_response(
                    input_tokens=response.usage.prompt_tokens,
                    output_tokens=response.usage.completion_tokens,
                    finish_reasons=[response.finish_reason],
                    response_model=response.model,
                    output_messages=[response.message],
                )
        except RetryableProviderError as exc:
            metrics.record_outcome(config, "retryable_error")
            raise to_application_error(exc) from exc
        except NonRetryableProviderError as exc:
            metrics.record_outcome(config, "fatal_error")
            raise to_application_error(exc) from exc

        # Before the postcondition, so it and everything after see one id per call in the run.
        response = response.model_copy(update={"message": with_engine_call_ids(response.message, request.messages)})
        post = check_response(request, response)
        metrics.record_checks("post", post)
        metrics.record_usage(config, response.usage, self._prices)
        metrics.record_outcome(config, "violation" if post else "ok")
        return response.model_copy(update={"violations": list(post)})
