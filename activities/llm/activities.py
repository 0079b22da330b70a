"""The ``llm.call`` activity: precondition, one provider call, postcondition.

Transport failures raise (Temporal retries them, honouring Retry-After);
postcondition violations come back as values in ``LLMResponse.violations``
for the workflow to re-prompt or degrade.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import httpx2
from pydantic import SecretStr
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ...contracts.config.settings import PriceTable, ProviderSettings
from ...contracts.errors import (
    BudgetExceededError,
    ContractViolationError,
    InvalidSpecError,
    NonRetryableProviderError,
    PayloadIntegrityError,
    RetryableProviderError,
)
from ...contracts.llm import context
from ...contracts.llm.call_ids import with_engine_call_ids
from ...contracts.llm.capabilities import check_capabilities
from ...contracts.llm.conversation import ConversationRef
from ...contracts.llm.messages import Message
from ...contracts.llm.postconditions import check_response
from ...contracts.llm.preconditions import check_request
from ...contracts.llm.prefix import Folds, KnownPrefix
from ...contracts.llm.request import ContextAction, LLMRequest, LLMResponse
from ...contracts.llm.tool_catalog import ToolCatalogRef
from ...contracts.llm.tools import ToolSchema, ToolsDescribeInput
from ...contracts.names import (
    LLM_CALL,
    LLM_CALL_PLAN_FIRST,
    LLM_CALL_RESOLVING_TOOLS,
    LLM_CALL_STORED_RESULTS,
    LLM_CALL_TOOL_CATALOG,
)
from ...contracts.quotas.plan import PlanFirstAnswer
from ...contracts.quotas.wire import QuotaPlan
from ...contracts.spec_check import check_spec_tools
from ...contracts.violations import Violation, ViolationKind
from ...failures import from_failure, to_application_error
from ...storage.conversations import ConversationStore, caller_owner
from ...telemetry.labels import MODELS
from ...telemetry.tracing import llm_span
from ..attempts import recalled, remember
from . import metrics
from .providers.registry import ProviderSet
from .providers.streams import TextSink
from .token_stream import TokenPublisher

_THROTTLED = "llm_throttled"


def _throttled_before() -> int:
    """The 429s earlier attempts of this activity got, as their last heartbeat recorded."""
    count = recalled(_THROTTLED)
    return max(0, count) if isinstance(count, int) else 0


def _owner(request: LLMRequest) -> str:
    """Who a chained call's segments are bound to: the workflow sets it from its own info, and it must
    name the calling workflow, so a request can never read or write another workflow's conversation."""
    return caller_owner(request.owner)


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
        describe: Callable[[ToolsDescribeInput], Awaitable[list[ToolSchema]]] | None = None,
        keys: Mapping[str, Mapping[str, SecretStr]] | None = None,
        plans: Callable[[str | None], QuotaPlan | None] | None = None,
    ) -> None:
        """``describe`` is the worker's ``tools.describe`` lookup, for requests that name their tools;
        ``keys`` the named provider keys (``client.settings.provider_keys``), beside each provider's default;
        ``plans`` the worker's quota plan of a tenant (``QuotaPlanActivities.plan_of``; unset: no quotas)."""
        self._describe = describe
        self._plans = plans
        self._providers = ProviderSet(settings, http, keys)
        self._prices = prices or PriceTable()
        # Priced models are labels from the start, even when a provider rejects a call to one.
        MODELS.add_known([*self._prices.input_per_mtok, *self._prices.output_per_mtok])
        self._conversations = conversations

    @activity.defn(name=LLM_CALL)
    async def call(self, request: LLMRequest) -> LLMResponse:
        if request.tools_ref is not None:
            request = await self._catalog_tools(request)
        tools = None
        if request.tool_names is not None:
            tools = await self._resolve_tools(request.tool_names)
            request = request.model_copy(update={"tools": tools, "tool_names": None})
        # A session's call carrying its schemas asks for them to be stored (``store_tools``): as a resolving call's.
        catalog = tools if tools is not None else (request.tools if request.store_tools and request.tools else None)
        response = await self._chat(request, catalog=catalog)
        return response if tools is None else response.model_copy(update={"tools": tools})

    @activity.defn(name=LLM_CALL_RESOLVING_TOOLS)
    async def call_resolving_tools(self, request: LLMRequest) -> LLMResponse:
        """``llm.call`` under the name only workers that resolve ``tool_names`` register."""
        return await self.call(request)

    @activity.defn(name=LLM_CALL_STORED_RESULTS)
    async def call_stored_results(self, request: LLMRequest) -> LLMResponse:
        """``llm.call`` under the name only workers that read ``stored_messages`` register."""
        return await self.call(request)

    @activity.defn(name=LLM_CALL_TOOL_CATALOG)
    async def call_tool_catalog(self, request: LLMRequest) -> LLMResponse:
        """``llm.call`` under the name only workers that read ``tools_ref`` register (they read
        ``stored_messages`` too: a request may carry both)."""
        return await self.call(request)

    @activity.defn(name=LLM_CALL_PLAN_FIRST)
    async def call_plan_first(self, request: LLMRequest) -> PlanFirstAnswer:
        """A run's first model call, its quota plan not known yet: this worker's plan for ``request.tenant``
        decides. With one, nothing is sent (not the model, not the store): the run reserves under it and calls
        again; with none, this is the call (any request the other names take)."""
        plan = self._plans(request.tenant) if self._plans is not None else None
        if plan is not None:
            return PlanFirstAnswer(plan=plan)
        return PlanFirstAnswer(response=await self.call(request.model_copy(update={"tenant": None})))

    async def _catalog_tools(self, request: LLMRequest) -> LLMRequest:
        """``request`` with the schemas of the catalog it names (bound to its owner, the calling workflow) as its
        ``tools``: from here on it is the request that carried them, checked the same."""
        assert request.tools_ref is not None
        if request.tools or request.tool_names is not None:
            raise to_application_error(
                PayloadIntegrityError("a request naming its tool catalog carries schemas or tool names of its own")
            )
        tools = await self._store().catalogs.load(request.tools_ref, _owner(request))
        return request.model_copy(update={"tools": tools, "tools_ref": None})

    async def _resolve_tools(self, names: list[str]) -> list[ToolSchema]:
        """What ``tools.describe`` and the spec's tool check did before a run's first call; nothing is sent
        to the model when a name is unknown or a schema unusable (typed, not retried)."""
        if self._describe is None:
            raise to_application_error(NonRetryableProviderError("this worker cannot resolve tool names"))
        tools = await self._describe(ToolsDescribeInput(names=names))
        violations = check_spec_tools(names, {t.name: t for t in tools}, whole_catalog=False)
        if violations:
            raise to_application_error(InvalidSpecError(violations), *[v.model_dump(mode="json") for v in violations])
        return tools

    async def _chat(self, request: LLMRequest, catalog: list[ToolSchema] | None = None) -> LLMResponse:
        """``catalog``: the schemas a resolving (or ``store_tools``) call stores, when chained, beside its segment."""
        chained = request.chained or request.conversation is not None
        owner = _owner(request)
        if request.stored_messages:
            request = await self._stored_messages(request, owner)
        full = request
        folds: Folds | None = None
        following: KnownPrefix | None = None
        if chained:
            known = await self._store().known(request.conversation, owner)
            full = request.model_copy(
                update={"messages": [*known.messages, *request.messages], "conversation": None, "chained": False}
            )
            # What this call derives from the conversation (its checks, its ids, its encoding) is resumed
            # from the stored prefix's and kept for the next call's, which extends this one.
            following = KnownPrefix(full.messages)
            folds = Folds(known, following)
        action = None
        if request.context_policy != "none" and not context.fits(full, folds):
            full, action = await self._compact(full)
        storing: asyncio.Task[tuple[ConversationRef, ToolCatalogRef | None]] | None = None
        if chained:
            # Stored while the model answers (a write is two fsyncs, or a PUT to S3), and awaited before
            # anything names it: the ref goes into history only once the segment is durable. A retry
            # stores the same segment under the same address. A compacted conversation starts a new
            # chain, so later calls build on the compacted one. A resolving call's tool catalog goes in
            # the same store call.
            whole: Sequence[Message] | KnownPrefix
            if action is None and following is not None:
                base, whole, added = request.conversation, following, request.messages
            else:
                base, whole, added = None, full.messages, full.messages
            storing = asyncio.ensure_future(self._store_segment(base, whole, added, owner, catalog))
        try:
            if request.stream is None:
                response = await self._call(full, folds=folds)
            else:
                async with TokenPublisher(request.stream, full.config.model) as tokens:
                    response = await self._call(full, on_text=tokens.add, folds=folds)
        except BaseException:
            if storing is not None:
                await asyncio.gather(storing, return_exceptions=True)  # the call's own failure is what counts
            raise
        stored, tools_ref = await storing if storing is not None else (None, None)
        cost = metrics.cost_usd(self._prices, full.config.model, response.usage)
        if action is not None:
            cost += metrics.cost_usd(self._prices, full.config.model, action.usage)
        return response.model_copy(
            update={"conversation": stored, "context": action, "cost_usd": cost, "tools_ref": tools_ref}
        )

    async def _store_segment(
        self,
        base: ConversationRef | None,
        whole: Sequence[Message] | KnownPrefix,
        added: list[Message],
        owner: str,
        catalog: list[ToolSchema] | None,
    ) -> tuple[ConversationRef, ToolCatalogRef | None]:
        if catalog is None or not owner:  # an unbound catalog would load in any run: never stored
            return await self._store().extend(base, whole, added, owner), None
        return await self._store().extend_with_catalog(base, whole, added, owner, catalog)

    async def _stored_messages(self, request: LLMRequest, owner: str) -> LLMRequest:
        """``request`` with each placeholder replaced by the tool message its ``tools.call`` stored: bound to
        this run (``owner``), and answering the same call, or the call fails typed and is not retried."""
        messages = list(request.messages)
        for index, ref in request.stored_messages.items():
            placeholder = messages[index] if 0 <= index < len(messages) else None
            stored = await self._store().load(ref, owner) if ref.length == 1 else []
            if (
                placeholder is None
                or len(stored) != 1
                or stored[0].role != "tool"
                or (stored[0].tool_call_id, stored[0].name) != (placeholder.tool_call_id, placeholder.name)
            ):
                raise to_application_error(
                    PayloadIntegrityError(
                        f"stored tool message {index} ({ref.sha256[:12]}) does not answer the call it stands for"
                    )
                )
            messages[index] = stored[0]
        return request.model_copy(update={"messages": messages, "stored_messages": {}})

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

    async def _call(
        self, request: LLMRequest, on_text: TextSink | None = None, folds: Folds | None = None
    ) -> LLMResponse:
        """One checked provider call; ``folds`` spares deriving again what the stored prefix already gave (the
        checks, the ids, the encoding are the same with it and without)."""
        config = request.config
        # The capability table is the worker's, so this part of the precondition is checked here.
        pre = check_request(request, folds) or check_capabilities(
            request, self._providers.capability(config.provider, config.model)
        )
        metrics.record_checks("pre", pre)
        if pre:
            metrics.record_outcome(config, "precondition")
            raise _precondition_failure(pre)

        try:
            await self._providers.load(config.provider)
            provider = self._providers.get(config.provider, config.api_key)
            started = time.perf_counter()
            with llm_span(
                config.provider, config.model, temperature=config.temperature, max_tokens=config.max_tokens
            ) as span:
                span.record_input(request.messages)
                served = True
                try:
                    if on_text is None:
                        response = await provider.complete(request, folds)
                    else:
                        response = await provider.stream(request, on_text, folds)
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
            if exc.status == 429:
                # The call that finally succeeds says it was throttled, so the run can tell its quota account.
                remember(_THROTTLED, _throttled_before() + 1)
            raise to_application_error(exc) from exc
        except NonRetryableProviderError as exc:
            metrics.record_outcome(config, "fatal_error")
            raise to_application_error(exc) from exc

        # Before the postcondition, so it and everything after see one id per call in the run.
        response = response.model_copy(
            update={"message": with_engine_call_ids(response.message, request.messages, folds)}
        )
        post = check_response(request, response)
        metrics.record_checks("post", post)
        metrics.record_usage(config, response.usage, self._prices)
        metrics.record_outcome(config, "violation" if post else "ok")
        return response.model_copy(update={"violations": list(post), "throttled": _throttled_before()})
