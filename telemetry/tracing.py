"""OpenTelemetry spans for LLM calls and tool calls, after the GenAI semantic conventions.

- ``llm_span(provider, model)`` opens ``chat {model}`` (kind CLIENT) with
  ``gen_ai.operation.name``, ``gen_ai.provider.name`` (and the older
  ``gen_ai.system`` that many backends still read), ``gen_ai.request.model``;
  the handle adds usage, response model and finish reasons.
- ``tool_span(tool)`` opens ``execute_tool {tool}`` with ``gen_ai.tool.name``.
- Prompt, response, tool arguments and results are recorded only when
  ``TracingSettings.capture_content`` is on; they may hold personal data.
- ``tracing_interceptors(settings)`` gives Temporal's ``TracingInterceptor``,
  which links client -> workflow -> activity spans, so a ``chat`` span opened
  in an activity sits under its workflow's trace.

Nothing is exported by default. ``configure_tracing`` adds an OTLP/HTTP
exporter when ``otlp_endpoint`` is set (``pip install 'agentsteps[otlp]'``).
Spans go to this module's provider, not the process-global one, so a library
that sets the global provider cannot redirect them, and tests can swap it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import opentelemetry.trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Tracer

from ..contracts.config.settings import TracingSettings, WorkerSettings
from ..contracts.errors import InvalidSpecError
from ..contracts.violations import Violation, ViolationKind

TRACER_NAME = "agentsteps"

# GenAI semantic-convention attribute names, spelled out once.
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
SYSTEM = "gen_ai.system"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

CONTENT_ATTRIBUTES = frozenset({INPUT_MESSAGES, OUTPUT_MESSAGES, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT})
"""Attributes that carry user content; present only when content capture is on."""


class _State:
    provider: TracerProvider | None = None
    capture_content: bool = False
    exporting: bool = False
    """The provider has a span processor: spans leave the process."""


def _tracing_settings(settings: WorkerSettings | TracingSettings | None) -> TracingSettings:
    if settings is None:
        return TracingSettings()
    if isinstance(settings, TracingSettings):
        return settings
    return settings.tracing


def configure_tracing(
    settings: WorkerSettings | TracingSettings | None = None, *, exporter: SpanExporter | None = None
) -> TracerProvider:
    """Install this process's tracer provider; replaces (and shuts down) a previous one.

    ``exporter`` is for tests (an ``InMemorySpanExporter``): it is used with a
    synchronous processor, so spans are visible as soon as they end.
    """
    config = _tracing_settings(settings)
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif config.otlp_endpoint:
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(config.otlp_endpoint)))
    previous = _State.provider
    _State.provider = provider
    _State.exporting = exporter is not None or bool(config.otlp_endpoint)
    _State.capture_content = config.capture_content
    if previous is not None:
        previous.shutdown()
    return provider


def _otlp_exporter(endpoint: str) -> SpanExporter:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise InvalidSpecError(
            [
                Violation(
                    contract="config",
                    phase="pre",
                    kind=ViolationKind.invalid_config,
                    path="$.tracing.otlp_endpoint",
                    message="an OTLP endpoint is set but the exporter is not installed: pip install 'agentsteps[otlp]'",
                )
            ]
        ) from None
    return OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")


def shutdown_tracing() -> None:
    """Flush and stop the exporter; call once at worker shutdown."""
    if _State.provider is not None:
        _State.provider.shutdown()
        _State.provider = None
        _State.exporting = False


_NO_OP = opentelemetry.trace.NoOpTracer()


def tracer() -> Tracer:
    """The configured tracer; a no-op one when it exports nothing (a span no one receives is pure cost,
    and a metric exemplar must not name a trace that does not exist); OpenTelemetry's global one
    (a no-op until someone configures it) before anything is configured."""
    if _State.provider is not None:
        return _State.provider.get_tracer(TRACER_NAME) if _State.exporting else _NO_OP
    return opentelemetry.trace.get_tracer(TRACER_NAME)


def tracing_interceptors(settings: WorkerSettings | TracingSettings | None = None) -> list[Any]:
    """Interceptors for ``Client.connect(interceptors=...)``; workers on that client inherit them.

    Configures tracing from ``settings`` first if nothing is configured yet.
    Pass them to the client only: giving them to the Worker as well would
    trace every task twice.

    None when nothing exports spans (no ``otlp_endpoint``): the interceptor
    would open spans for every workflow task and activity and write a trace
    header into every command's payloads, all for spans that go nowhere
    (measured in bench/throughput.py, see docs/benchmarks.md). Configure every
    worker of a deployment alike: one that exports nothing neither traces nor
    passes a trace on.
    """
    from temporalio.contrib.opentelemetry import TracingInterceptor

    if _State.provider is None:
        configure_tracing(settings)
    if not _State.exporting:
        return []
    return [TracingInterceptor(tracer())]


def _json(value: Any) -> str:
    def default(obj: Any) -> Any:
        dump = getattr(obj, "model_dump", None)
        return dump(mode="json") if dump else str(obj)

    return json.dumps(value, default=default, ensure_ascii=False)


class LLMSpan:
    """Handle yielded by :func:`llm_span`; every method is a no-op on a non-recording span."""

    def __init__(self, span: Span, capture_content: bool) -> None:
        self.span = span
        self.capture_content = capture_content

    def record_input(self, messages: Sequence[Any]) -> None:
        if self.capture_content:
            self.span.set_attribute(INPUT_MESSAGES, _json(list(messages)))

    @property
    def trace_id(self) -> str | None:
        """The span's trace id (32 hex digits) when it is recorded, for a metric exemplar; else None."""
        context = self.span.get_span_context()
        if not self.span.is_recording() or not context.is_valid:
            return None
        return format(context.trace_id, "032x")

    def record_response(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        finish_reasons: Sequence[str],
        response_model: str | None = None,
        output_messages: Sequence[Any] | None = None,
    ) -> None:
        self.span.set_attribute(USAGE_INPUT_TOKENS, input_tokens)
        self.span.set_attribute(USAGE_OUTPUT_TOKENS, output_tokens)
        self.span.set_attribute(RESPONSE_FINISH_REASONS, list(finish_reasons))
        if response_model:
            self.span.set_attribute(RESPONSE_MODEL, response_model)
        if self.capture_content and output_messages is not None:
            self.span.set_attribute(OUTPUT_MESSAGES, _json(list(output_messages)))


class ToolSpan:
    """Handle yielded by :func:`tool_span`."""

    def __init__(self, span: Span, capture_content: bool) -> None:
        self.span = span
        self.capture_content = capture_content

    def record_arguments(self, arguments: Any) -> None:
        if self.capture_content:
            self.span.set_attribute(TOOL_CALL_ARGUMENTS, _json(arguments))

    def record_result(self, result: Any) -> None:
        if self.capture_content:
            self.span.set_attribute(TOOL_CALL_RESULT, _json(result))


@contextmanager
def _error_typed(span: Span) -> Iterator[None]:
    try:
        yield
    except BaseException as exc:
        span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
        raise


@contextmanager
def llm_span(
    provider: str,
    model: str,
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Iterator[LLMSpan]:
    """``chat {model}`` around one provider request; records ``error.type`` if the block raises."""
    attributes: dict[str, Any] = {
        OPERATION_NAME: "chat",
        PROVIDER_NAME: provider,
        SYSTEM: provider,
        REQUEST_MODEL: model,
    }
    if temperature is not None:
        attributes[REQUEST_TEMPERATURE] = temperature
    if max_tokens is not None:
        attributes[REQUEST_MAX_TOKENS] = max_tokens
    with tracer().start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
        with _error_typed(span):
            yield LLMSpan(span, _State.capture_content)


@contextmanager
def tool_span(tool: str, *, call_id: str | None = None, tool_type: str = "function") -> Iterator[ToolSpan]:
    """``execute_tool {tool}`` around one tool call (``tool_type``: ``function`` or ``extension`` for MCP)."""
    attributes: dict[str, Any] = {OPERATION_NAME: "execute_tool", TOOL_NAME: tool, TOOL_TYPE: tool_type}
    if call_id:
        attributes[TOOL_CALL_ID] = call_id
    with tracer().start_as_current_span(f"execute_tool {tool}", kind=SpanKind.INTERNAL, attributes=attributes) as span:
        with _error_typed(span):
            yield ToolSpan(span, _State.capture_content)
