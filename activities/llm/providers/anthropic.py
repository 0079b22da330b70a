"""Anthropic Messages on the official SDK.

Differences from the Chat Completions shape, handled here:

- system messages travel in the top-level ``system`` field;
- tool calls are ``tool_use`` blocks; tool messages become ``tool_result``
  blocks, and consecutive ones are grouped into one user message as the API
  requires (a following user text joins that same message);
- a JSON answer is asked for with ``output_config.format`` where the model
  takes it (capability table); otherwise as an instruction at the end of the
  system prompt. Either way the postcondition checks the answer;
- prompt caching: the tools, the system prompt and the conversation so far end
  in ``cache_control`` marks, so each call of a run reads the previous prefix;
- the SDK has no ``temperature`` parameter any more: it is sent (in the body)
  only to models the capability table says accept it.

``complete`` sends what ``messages.create`` sends, without its per-call work: the
SDK builds the request once per timeout (``PreparedPost``), the body is the SDK's
encoding of the params in its key order (``request_body``), and the per-call part
of ``create`` is done here with the SDK's own tables (the timeout it derives
from ``max_tokens`` and the model, and its refusal of a call expected to take
over 10 minutes; the deprecated-model warning). A call the SDK would trace goes
through ``messages.create`` (``sdk_would_trace``). ``stream`` posts through the
SDK's ``post``.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import anthropic
import httpx2
from anthropic.types import CacheControlEphemeralParam, MessageParam, TextBlockParam, ToolParam
from anthropic.types import Message as WireMessage
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from pydantic import SecretStr

from ....contracts.llm.capabilities import ModelCapability, capability_for
from ....contracts.llm.messages import LLMToolCall, Message
from ....contracts.llm.prefix import Folds
from ....contracts.llm.request import FinishReason, LLMRequest, LLMResponse, Usage
from .base import DEFAULT_OPTIONS, PreparedPost, parse_wire, sdk_call, sdk_json, sdk_would_trace
from .errors import DEFAULT_RETRY_AFTER_CAP
from .streams import AnthropicEvents, TextSink, read_stream
from .wire_names import WireNames

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "refusal",
    "model_context_window_exceeded": "context_window_exceeded",
    "pause_turn": "pause_turn",
}
_TOOL_CHOICE: dict[str, Any] = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
_CACHE: CacheControlEphemeralParam = {"type": "ephemeral"}
MESSAGES_PATH = "/v1/messages"


def json_instruction(name: str, schema: dict[str, Any]) -> str:
    return (
        f"Reply with only a JSON value named {name!r}, with no prose and no code fences, "
        f"that validates against this JSON Schema:\n{json.dumps(schema)}"
    )


def _tool_input(arguments: str) -> dict[str, Any]:
    # The API wants an object. Blank text is "no arguments". History may hold arguments the
    # model got wrong (that is what a re-prompt is about), so keep them visible instead of failing.
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"_raw_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": arguments}


def _blocks(message: Message, names: WireNames) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content or "",
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    blocks: list[dict[str, Any]] = []
    # The API rejects empty text blocks, and a message with no blocks at all.
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": names.tool(call.name), "input": _tool_input(call.arguments)}
        )
    return message.role, blocks


def _messages(request: LLMRequest, *, mark_cache: bool) -> list[MessageParam]:
    """The conversation as the API's messages; with ``mark_cache``, the last block carries the cache mark."""
    messages: list[dict[str, Any]] = []
    names = WireNames(request)
    for message in request.messages:
        if message.role == "system":
            continue
        role, blocks = _blocks(message, names)
        if not blocks:
            continue  # an empty answer carries nothing; the API rejects `content: []`
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    if mark_cache and messages:
        content = messages[-1]["content"]
        content[-1] = {**content[-1], "cache_control": _CACHE}
    # Built as JSON objects, which is what the SDK's MessageParam TypedDicts describe.
    return messages  # type: ignore[return-value]


def request_to_wire(
    request: LLMRequest, capability: ModelCapability | None = None, *, caching: bool = True
) -> tuple[MessageCreateParamsNonStreaming, dict[str, Any]]:
    """The SDK params, and the extra body fields the SDK no longer types (``temperature``)."""
    capability = capability or capability_for("anthropic", request.config.model)
    system_parts = [m.content for m in request.messages if m.role == "system" and m.content]
    fmt = request.response_format
    if fmt is not None and not capability.structured_output:
        system_parts.append(json_instruction(fmt.name, fmt.json_schema))
    # Keys in the order messages.create lays its body out, so ``request_body`` is its bytes.
    params: MessageCreateParamsNonStreaming = {
        "max_tokens": request.config.max_tokens,
        "messages": _messages(request, mark_cache=caching),
        "model": request.config.model,
    }
    if fmt is not None and capability.structured_output:
        params["output_config"] = {"format": {"type": "json_schema", "schema": fmt.json_schema}}
    if system_parts:
        system: list[TextBlockParam] = [{"type": "text", "text": "\n\n".join(system_parts)}]
        params["system"] = system
    if request.tools:
        tools: list[ToolParam] = [
            {"name": WireNames.tool(t.name), "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        params["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
        params["tools"] = tools
    if caching:
        _mark_cache(params)
    extra: dict[str, Any] = {}
    if request.config.temperature is not None and capability.temperature:
        extra["temperature"] = request.config.temperature
    return params, extra


def request_body(params: MessageCreateParamsNonStreaming, extra_body: dict[str, Any]) -> bytes:
    """The bytes ``messages.create(**params, extra_body=extra_body)`` sends.

    The SDK's param preparation copies the params without their omitted entries and reads file inputs
    (``{"type": "base64", "data": <path or file>}``); these hold only JSON values, so it is an identity
    on them. Its ``extra_body`` is merged last. tests/activities/test_prepared_post_anthropic.py compares the bytes.
    """
    return sdk_json({**params, **extra_body})


def _mark_cache(params: MessageCreateParamsNonStreaming) -> None:
    """Cache breakpoints (at most 4 allowed): end of tools, end of system, end of the conversation (the last
    one set by ``_messages``).

    The prefix up to a mark is cached; the next call of the run repeats that
    prefix and extends it, so it reads everything up to the previous mark.
    """
    tools = list(params.get("tools") or [])
    if tools:
        tools[-1] = tools[-1].copy()
        tools[-1]["cache_control"] = _CACHE
        params["tools"] = tools
    system = params.get("system")
    if system and not isinstance(system, str):  # request_to_wire sends the list form only
        blocks = list(system)
        blocks[-1] = blocks[-1].copy()
        blocks[-1]["cache_control"] = _CACHE
        params["system"] = blocks
    # The conversation's mark is set as _messages builds it.


def _normalised(body: dict[str, Any]) -> tuple[dict[str, Any], dict[int, str]]:
    """Fill the envelope fields compatible servers leave out, so the SDK model can validate the rest.

    A ``tool_use`` input that is not an object (a compatible server passing the
    model's broken text through) is set aside by block index: the postcondition
    must see that raw text, and the SDK model only takes an object.
    """
    body = {
        "id": "",
        "type": "message",
        "role": "assistant",
        "model": "",
        "usage": {"input_tokens": 0, "output_tokens": 0},
        **body,
    }
    raw: dict[int, str] = {}
    content = body.get("content")
    if isinstance(content, list):
        blocks = []
        for i, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("input"), str):
                raw[i] = block["input"]
                block = {**block, "input": {}}
            blocks.append(block)
        body["content"] = blocks
    return body, raw


def response_from_wire(body: dict[str, Any], request: LLMRequest) -> LLMResponse:
    normalised, raw_inputs = _normalised(body)
    wire = parse_wire(WireMessage, "anthropic", normalised)
    texts = [b.text for b in wire.content if b.type == "text"]
    names = WireNames(request)
    calls = [
        LLMToolCall(id=b.id, name=names.engine_tool(b.name), arguments=raw_inputs.get(i, _arguments_text(b.input)))
        for i, b in enumerate(wire.content)
        if b.type == "tool_use"
    ]
    if wire.stop_reason is None:
        finish: FinishReason = "tool_calls" if calls else "stop"
    else:
        finish = _FINISH.get(wire.stop_reason, "other")
    refusal = None
    if finish == "refusal":
        details = wire.stop_details
        refusal = (details.explanation if details is not None else None) or "".join(texts) or "refused"
    return LLMResponse(
        message=Message(role="assistant", content="".join(texts) if texts else None, tool_calls=tuple(calls)),
        usage=_usage(wire),
        finish_reason=finish,
        provider="anthropic",
        model=wire.model or request.config.model,
        refusal=refusal,
    )


def _arguments_text(value: Any) -> str:
    # A string input is kept verbatim so an unparseable one is caught by the postcondition.
    return value if isinstance(value, str) else json.dumps({} if value is None else value)


def _usage(wire: WireMessage) -> Usage:
    usage = wire.usage
    read, write = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
    # input_tokens excludes the cached parts; they are still prompt tokens for budgets and the context window.
    prompt = usage.input_tokens + read + write
    details = usage.output_tokens_details
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=usage.output_tokens,
        total_tokens=prompt + usage.output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=details.thinking_tokens if details is not None else 0,
    )


def _warn_deprecated(model: str, end_of_life: str) -> None:
    # messages.create's warning, word for word (test_prepared_post_anthropic compares them), from the same module.
    warnings.warn(
        f"The model '{model}' is deprecated and will reach end-of-life on {end_of_life}.\nPlease migrate to a newer "
        "model. Visit https://docs.anthropic.com/en/docs/resources/model-deprecations for more information.",
        DeprecationWarning,
        stacklevel=2,  # ``call`` in ``complete``: where the SDK's (its caller's caller) points too
    )


def _create_internals() -> tuple[dict[str, int], dict[str, str], type[Any]] | None:
    """The SDK tables ``messages.create`` reads per call, and its options model; None if a later SDK moved them."""
    try:
        from anthropic._constants import MODEL_NONSTREAMING_TOKENS
        from anthropic._models import FinalRequestOptions
        from anthropic.resources.messages import DEPRECATED_MODELS
    except ImportError:
        return None
    return MODEL_NONSTREAMING_TOKENS, DEPRECATED_MODELS, FinalRequestOptions


_INTERNALS = _create_internals()


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        base_url: str,
        api_key: SecretStr | str | None = None,
        timeout: float | None = None,
        retry_after_cap: float | None = DEFAULT_RETRY_AFTER_CAP,
        api_version: str | None = None,
        caching: bool = True,
        capabilities: list[ModelCapability] | None = None,
    ) -> None:
        self._key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        headers = {"anthropic-version": api_version} if api_version else None
        # An explicit key (a placeholder when there is none) keeps the SDK from reading
        # ANTHROPIC_API_KEY, profiles or credential files: settings are loaded in one place.
        self._client = anthropic.AsyncAnthropic(
            api_key=self._key or "unset", base_url=base_url, http_client=http, max_retries=0, default_headers=headers
        )
        self._timeout = timeout
        self._cap = retry_after_cap
        self._caching = caching
        self._capabilities = list(capabilities or [])
        # No auth headers at all without a key.
        self._auth: anthropic.RequestOptions = (
            {} if self._key else {"headers": {"Authorization": anthropic.Omit(), "X-Api-Key": anthropic.Omit()}}
        )
        # The timeout is each call's (``complete``); the rest of the request is the client's.
        self._post: PreparedPost | None = None
        if _INTERNALS is not None and hasattr(self._client, "_calculate_nonstreaming_timeout"):
            self._post = PreparedPost(self._client, http, MESSAGES_PATH, self._auth, _INTERNALS[2])

    def _prepared(
        self, request: LLMRequest
    ) -> tuple[MessageCreateParamsNonStreaming, dict[str, Any], anthropic.RequestOptions]:
        """Wire params, the body fields the SDK's params do not declare, and request options
        (timeout; no auth headers at all without a key)."""
        capability = capability_for(self.name, request.config.model, self._capabilities)
        params, extra_body = request_to_wire(request, capability, caching=self._caching)
        options = self._auth.copy()
        if self._timeout is not None:
            options["timeout"] = self._timeout
        return params, extra_body, options

    async def complete(self, request: LLMRequest, folds: Folds | None = None) -> LLMResponse:
        # ``folds`` is not used: the prompt-cache marks move with each call, so the body is built whole.
        params, extra_body, options = self._prepared(request)
        if self._post is None or _INTERNALS is None or sdk_would_trace(self._client):
            return await self._complete_by_sdk(request, params, extra_body, options)
        post, (nonstreaming_tokens, deprecated, _) = self._post, _INTERNALS

        async def call() -> httpx2.Response:
            # What messages.create does before its post, in its order, inside sdk_call so that its refusal is
            # classified as before, from the SDK's own tables. Its warning about a thinking config does not apply:
            # none is sent.
            model = params["model"]
            timeout: Any = self._timeout
            if timeout is None:
                timeout = DEFAULT_OPTIONS
                if self._client.timeout == anthropic.DEFAULT_TIMEOUT:
                    timeout = self._client._calculate_nonstreaming_timeout(
                        params["max_tokens"], nonstreaming_tokens.get(model, None)
                    )
            if model in deprecated:
                _warn_deprecated(model, deprecated[model])
            return await post.send(request_body(params, extra_body), timeout)

        body = await sdk_call(self.name, call, secret=self._key, retry_after_cap=self._cap)
        return response_from_wire(body, request)

    async def _complete_by_sdk(
        self,
        request: LLMRequest,
        params: MessageCreateParamsNonStreaming,
        extra_body: dict[str, Any],
        options: anthropic.RequestOptions,
    ) -> LLMResponse:
        """``complete`` through ``messages.create``, for a call it traces or an SDK whose internals moved."""
        extra: dict[str, Any] = {"extra_body": extra_body} if extra_body else {}
        if "timeout" in options:
            extra["timeout"] = options["timeout"]
        if "headers" in options:
            extra["extra_headers"] = options["headers"]

        async def call() -> Any:
            return (await self._client.messages.with_raw_response.create(**params, **extra)).http_response

        body = await sdk_call(self.name, call, secret=self._key, retry_after_cap=self._cap)
        return response_from_wire(body, request)

    async def stream(self, request: LLMRequest, on_text: TextSink, folds: Folds | None = None) -> LLMResponse:
        """The same call with ``stream: true``; text deltas go to ``on_text``, the assembled answer is returned."""
        params, extra_body, options = self._prepared(request)
        body = {**params, **extra_body, "stream": True}

        async def open_stream() -> Any:
            # Posted like messages.create(stream=True), but each event comes back as its parsed JSON.
            return await self._client.post(
                "/v1/messages",
                cast_to=object,
                body=body,
                options=options,
                stream=True,
                stream_cls=anthropic.AsyncStream[object],
            )

        assembled = await read_stream(
            self.name, open_stream, AnthropicEvents(), on_text, secret=self._key, retry_after_cap=self._cap
        )
        return response_from_wire(assembled, request)
