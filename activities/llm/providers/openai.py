"""OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM) on the official SDK.

The request is built as the SDK's own ``CompletionCreateParamsNonStreaming``
and the answer is validated with its ``ChatCompletion`` model; only the mapping
between those and ``LLMRequest``/``LLMResponse`` lives here. The SDK builds the
HTTP request once per provider (``PreparedPost``); each call sends it with its
body. Without a key (local servers) no Authorization header is sent.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
from openai._types import RequestOptions
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import SecretStr

from ....contracts.llm.capabilities import ModelCapability, capability_for
from ....contracts.llm.messages import LLMToolCall, Message
from ....contracts.llm.prefix import Folds, fold
from ....contracts.llm.request import FinishReason, LLMRequest, LLMResponse, Usage
from .base import PreparedPost, parse_wire, sdk_call, sdk_json
from .errors import DEFAULT_RETRY_AFTER_CAP, malformed
from .openai_stream import OpenAIEventStream
from .streams import OpenAIChunks, TextSink, read_stream
from .wire_names import WireNames

CHAT_COMPLETIONS_PATH = "/chat/completions"

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def _message_to_wire(message: Message) -> ChatCompletionMessageParam | None:
    # A function of the message alone (tool names map the same in every request), so its encoding
    # can be kept per conversation prefix (``request_body``).
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content or ""}
    if message.role == "assistant":
        if not message.content and not message.tool_calls:
            # An empty answer carries nothing, and the API rejects an assistant
            # message with neither content nor tool calls (a re-prompt after an
            # empty answer would otherwise die as a non-retryable 400).
            return None
        if message.tool_calls:
            return {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": WireNames.tool(c.name), "arguments": c.arguments},
                    }
                    for c in message.tool_calls
                ],
            }
        return {"role": "assistant", "content": message.content}
    if message.role == "system":
        return {"role": "system", "content": message.content or ""}
    return {"role": "user", "content": message.content or ""}


def _tool_to_wire(tool: Any) -> ChatCompletionToolParam:
    return {
        "type": "function",
        "function": {"name": WireNames.tool(tool.name), "description": tool.description, "parameters": tool.parameters},
    }


def request_to_wire(
    request: LLMRequest, capability: ModelCapability | None = None
) -> CompletionCreateParamsNonStreaming:
    messages = [wire for m in request.messages if (wire := _message_to_wire(m)) is not None]
    return _params(request, capability, messages)


def _encoded(fragments: list[bytes], message: Message) -> list[bytes]:
    wire = _message_to_wire(message)
    if wire is not None:
        fragments.append(sdk_json(wire))
    return fragments


def request_body(
    request: LLMRequest,
    capability: ModelCapability | None = None,
    *,
    extra: dict[str, Any] | None = None,
    folds: Folds | None = None,
) -> bytes:
    """The bytes the SDK sends for ``request_to_wire(request, capability)`` plus ``extra`` (posted as ``body=``).

    Built from each message's own encoding (JSON composes: an array is its items joined by commas), so a
    call encodes only the messages its conversation's stored prefix did not (``folds``); the bytes are the
    same either way (tests/activities/test_prefix_cache.py).
    """
    if folds is None:
        return sdk_json({**request_to_wire(request, capability), **(extra or {})})
    fragments = fold(folds, "openai.messages", request.messages, list, _encoded, list)
    rest: dict[str, Any] = {**_params(request, capability, []), **(extra or {})}
    model = rest.pop("model")
    del rest["messages"]  # the second key, after "model": where the SDK's encoding puts it
    return b"".join((b'{"model":', sdk_json(model), b',"messages":[', b",".join(fragments), b"],", sdk_json(rest)[1:]))


def _params(
    request: LLMRequest, capability: ModelCapability | None, messages: list[ChatCompletionMessageParam]
) -> CompletionCreateParamsNonStreaming:
    # max_tokens is deprecated and rejected by reasoning models; max_completion_tokens is what the API documents.
    params: CompletionCreateParamsNonStreaming = {
        "model": request.config.model,
        "messages": messages,
        "max_completion_tokens": request.config.max_tokens,
    }
    capability = capability or capability_for("openai", request.config.model)
    # Reasoning models reject a temperature; the precondition has already refused a set one for them.
    if capability.temperature and request.config.temperature is not None:
        params["temperature"] = request.config.temperature
    # OpenAI rejects tool_choice without tools, so both go together.
    if request.tools:
        params["tools"] = [_tool_to_wire(t) for t in request.tools]
        params["tool_choice"] = request.tool_choice
    if request.response_format is not None:
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": request.response_format.name,
                "schema": request.response_format.json_schema,
                # Not strict: strict mode restricts the schema dialect; validation is our postcondition.
                "strict": False,
            },
        }
    return params


def _normalised(body: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Fill what OpenAI-compatible servers leave out, so the SDK model can validate the rest.

    Returns the body and the raw finish reason: compatible servers send values
    outside the SDK's literal (or none), and the postcondition must see them.
    """
    body = {"id": "", "object": "chat.completion", "created": 0, **body}
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        return body, None
    first = choices[0]
    if not isinstance(first, dict):
        return body, None
    raw_finish = first.get("finish_reason")
    first = {"index": 0, **first, "finish_reason": raw_finish if raw_finish in _FINISH else "stop"}
    message = first.get("message")
    if isinstance(message, dict):
        message = {"role": "assistant", **message}
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            # Some servers (Ollama) send arguments as an object; the contract keeps the raw text.
            message["tool_calls"] = [_normalised_call(c) for c in calls]
        first["message"] = message
    body["choices"] = [first, *choices[1:]]
    return body, raw_finish if isinstance(raw_finish, str) else None


def _normalised_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    call = {"type": "function", **call}
    function = call.get("function")
    if isinstance(function, dict):
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        call["function"] = {**function, "arguments": arguments}
    return call


def response_from_wire(body: dict[str, Any], request: LLMRequest) -> LLMResponse:
    body, raw_finish = _normalised(body)
    completion = parse_wire(ChatCompletion, "openai", body)
    if not completion.choices:
        raise malformed("openai", "choices: the list is empty")
    choice = completion.choices[0]
    message = choice.message
    names = WireNames(request)
    calls = [
        LLMToolCall(id=c.id, name=names.engine_tool(c.function.name), arguments=c.function.arguments)
        for c in message.tool_calls or []
        if c.type == "function"
    ]
    if raw_finish is None:
        finish: FinishReason = "tool_calls" if calls else "stop"
    else:
        finish = _FINISH.get(raw_finish, "other")
    return LLMResponse(
        message=Message(role="assistant", content=message.content, tool_calls=tuple(calls)),
        usage=_usage(completion),
        finish_reason=finish,
        provider="openai",
        model=completion.model or request.config.model,
        refusal=message.refusal,
    )


def _usage(completion: ChatCompletion) -> Usage:
    usage = completion.usage
    if usage is None:
        return Usage()
    prompt, output = usage.prompt_tokens_details, usage.completion_tokens_details
    return Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        cache_read_tokens=(prompt.cached_tokens or 0) if prompt else 0,
        cache_write_tokens=(prompt.cache_write_tokens or 0) if prompt else 0,
        reasoning_tokens=(output.reasoning_tokens or 0) if output else 0,
    )


def _final_request_options() -> type[Any] | None:
    try:
        from openai._models import FinalRequestOptions
    except ImportError:  # a later SDK moved it: PreparedPost posts through the SDK's own post
        return None
    return FinalRequestOptions


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        base_url: str,
        api_key: SecretStr | str | None = None,
        timeout: float | None = None,
        retry_after_cap: float | None = DEFAULT_RETRY_AFTER_CAP,
        capabilities: list[ModelCapability] | None = None,
    ) -> None:
        self._key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        # The key is passed explicitly (even when empty) so the SDK never reads OPENAI_API_KEY itself:
        # settings are loaded in one place. Retries are Temporal's.
        self._client = openai.AsyncOpenAI(
            api_key=self._key or "", base_url=base_url, http_client=http, max_retries=0, _enforce_credentials=False
        )
        self._cap = retry_after_cap
        self._capabilities = list(capabilities or [])
        self._options: RequestOptions = {}
        if timeout is not None:
            self._options["timeout"] = timeout
        if not self._key:
            self._options["headers"] = {"Authorization": openai.Omit()}
        self._post = PreparedPost(self._client, http, CHAT_COMPLETIONS_PATH, self._options, _final_request_options())

    def _capability(self, request: LLMRequest) -> ModelCapability:
        return capability_for(self.name, request.config.model, self._capabilities)

    async def stream(self, request: LLMRequest, on_text: TextSink, folds: Folds | None = None) -> LLMResponse:
        """The same call with ``stream: true``; text deltas go to ``on_text``, the assembled answer is returned."""
        capability = self._capability(request)

        async def open_stream() -> Any:
            body = request_body(
                request, capability, extra={"stream": True, "stream_options": {"include_usage": True}}, folds=folds
            )
            # cast_to=object: the SDK parses each event's JSON and hands it over as is; the assembler checks it.
            return await self._client.post(
                CHAT_COMPLETIONS_PATH,
                cast_to=object,
                content=body,
                options=self._options,
                stream=True,
                stream_cls=OpenAIEventStream[object],
            )

        assembled = await read_stream(
            self.name, open_stream, OpenAIChunks(), on_text, secret=self._key, retry_after_cap=self._cap
        )
        return response_from_wire(assembled, request)

    async def complete(self, request: LLMRequest, folds: Folds | None = None) -> LLMResponse:
        capability = self._capability(request)

        async def post() -> httpx2.Response:
            # The SDK client's request (auth, headers, timeout, errors), built by it once (``PreparedPost``),
            # and not through chat.completions.create: its per-field param transform tries every message
            # against every member of the message union (~60 ms CPU at 400 messages, the largest cost of a
            # long run's step), and it is an identity on these params, which declare no aliases or formats
            # (test_provider_sdk pins that). The body is the SDK's own encoding of them (``request_body``),
            # each message encoded once per conversation; built in here so an encoding error is classified
            # as before.
            return await self._post.send(request_body(request, capability, folds=folds))

        body = await sdk_call(self.name, post, secret=self._key, retry_after_cap=self._cap)
        return response_from_wire(body, request)
