"""Anthropic Messages: ``POST {base_url}/v1/messages``.

Differences from the Chat Completions shape, handled here:

- system messages travel in the top-level ``system`` field;
- tool calls are ``tool_use`` blocks; tool messages become ``tool_result``
  blocks, and consecutive ones are grouped into one user message as the API
  requires (a following user text joins that same message);
- the API has no JSON-schema response format, so a requested one is stated as
  an instruction at the end of the system prompt. Whether the answer complies
  is then checked by the postcondition, like for any provider;
- temperature is capped at 1.0, the API's maximum.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import BaseModel, SecretStr, model_validator

from ...contracts.llm.messages import LLMToolCall, Message
from ...contracts.llm.request import FinishReason, LLMRequest, LLMResponse, Usage
from .base import parse_wire, post_json

API_VERSION = "2023-06-01"

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}


def json_instruction(name: str, schema: dict[str, Any]) -> str:
    return (
        f"Reply with only a JSON value named {name!r}, with no prose and no code fences, "
        f"that validates against this JSON Schema:\n{json.dumps(schema)}"
    )


def _tool_input(arguments: str) -> dict[str, Any]:
    # The API wants an object. History may hold arguments the model got wrong
    # (that is what a re-prompt is about), so keep them visible instead of failing.
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {"_raw_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": arguments}


def _blocks(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id,
                                 "content": message.content or ""}
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call.arguments)})
    return message.role, blocks


def request_to_wire(request: LLMRequest) -> dict[str, Any]:
    system_parts = [m.content for m in request.messages if m.role == "system" and m.content]
    if request.response_format is not None:
        system_parts.append(json_instruction(request.response_format.name, request.response_format.json_schema))
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            continue
        role, blocks = _blocks(message)
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    payload: dict[str, Any] = {
        "model": request.config.model,
        "max_tokens": request.config.max_tokens,
        "messages": messages,
        "temperature": min(request.config.temperature, 1.0),
    }
    if system_parts:
        payload["system"] = "\n\n".join(system_parts)
    if request.tools:
        payload["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
        ]
        payload["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
    return payload


class _Block(BaseModel):
    type: str
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None

    @model_validator(mode="after")
    def _complete(self) -> _Block:
        if self.type == "text" and self.text is None:
            raise ValueError("text block without text")
        if self.type == "tool_use" and (self.id is None or self.name is None):
            raise ValueError("tool_use block without id or name")
        return self


class _Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _Message(BaseModel):
    model: str | None = None
    content: list[_Block]
    stop_reason: str | None = None
    usage: _Usage | None = None


def _arguments_text(value: Any) -> str:
    # A string input is kept verbatim so an unparseable one is caught by the postcondition.
    return value if isinstance(value, str) else json.dumps({} if value is None else value)


def response_from_wire(body: dict[str, Any], request: LLMRequest) -> LLMResponse:
    wire = parse_wire(_Message, "anthropic", body)
    texts = [b.text for b in wire.content if b.type == "text" and b.text is not None]
    calls = [
        LLMToolCall(id=b.id or "", name=b.name or "", arguments=_arguments_text(b.input))
        for b in wire.content
        if b.type == "tool_use"
    ]
    if wire.stop_reason is None:
        finish: FinishReason = "tool_calls" if calls else "stop"
    else:
        finish = _FINISH.get(wire.stop_reason, "other")
    usage = wire.usage or _Usage()
    # Cached prompt tokens are still prompt tokens for budgets and the context window.
    prompt = usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    return LLMResponse(
        message=Message(role="assistant", content="".join(texts) if texts else None, tool_calls=calls),
        usage=Usage(prompt_tokens=prompt, completion_tokens=usage.output_tokens,
                    total_tokens=prompt + usage.output_tokens),
        finish_reason=finish,
        provider="anthropic",
        model=wire.model or request.config.model,
    )


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, http: httpx.AsyncClient, *, base_url: str, api_key: SecretStr | str | None = None,
                 timeout: float | None = None) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._timeout = timeout

    async def complete(self, request: LLMRequest) -> LLMResponse:
        headers = {"anthropic-version": API_VERSION}
        if self._key:
            headers["x-api-key"] = self._key
        body = await post_json(self._http, self.name, self._url, request_to_wire(request), headers,
                               timeout=self._timeout, secret=self._key)
        return response_from_wire(body, request)
