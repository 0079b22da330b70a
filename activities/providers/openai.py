"""OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM).

``POST {base_url}/chat/completions``. The key goes in ``Authorization: Bearer``;
without one (local servers) no Authorization header is sent.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import BaseModel, Field, SecretStr

from ...contracts.llm.messages import LLMToolCall, Message
from ...contracts.llm.request import FinishReason, LLMRequest, LLMResponse, Usage
from .base import parse_wire, post_json

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def _message_to_wire(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content or ""}
    if message.role == "assistant":
        wire: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in message.tool_calls
            ]
        return wire
    return {"role": message.role, "content": message.content or ""}


def request_to_wire(request: LLMRequest) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "model": request.config.model,
        "messages": [_message_to_wire(m) for m in request.messages],
        "temperature": request.config.temperature,
        "max_tokens": request.config.max_tokens,
    }
    # OpenAI rejects tool_choice without tools, so both go together.
    if request.tools:
        payload["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
        payload["tool_choice"] = request.tool_choice
    if request.response_format is not None:
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": request.response_format.name,
                "schema": request.response_format.json_schema,
                # Not strict: strict mode restricts the schema dialect; validation is our postcondition.
                "strict": False,
            },
        }
    return payload


class _Function(BaseModel):
    name: str
    arguments: str | dict[str, Any] | list[Any] | None = None


class _ToolCall(BaseModel):
    id: str
    function: _Function


class _Message(BaseModel):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int | None = None


class _Completion(BaseModel):
    model: str | None = None
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


def _arguments_text(arguments: str | dict[str, Any] | list[Any] | None) -> str:
    # Some compatible servers (Ollama) send an object; the contract wants the raw text.
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def response_from_wire(body: dict[str, Any], request: LLMRequest) -> LLMResponse:
    completion = parse_wire(_Completion, "openai", body)
    choice = completion.choices[0]
    calls = [
        LLMToolCall(id=c.id, name=c.function.name, arguments=_arguments_text(c.function.arguments))
        for c in choice.message.tool_calls or []
    ]
    if choice.finish_reason is None:
        finish: FinishReason = "tool_calls" if calls else "stop"
    else:
        finish = _FINISH.get(choice.finish_reason, "other")
    usage = completion.usage or _Usage()
    total = usage.total_tokens if usage.total_tokens is not None else usage.prompt_tokens + usage.completion_tokens
    return LLMResponse(
        message=Message(role="assistant", content=choice.message.content, tool_calls=calls),
        usage=Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens, total_tokens=total),
        finish_reason=finish,
        provider="openai",
        model=completion.model or request.config.model,
    )


class OpenAIProvider:
    name = "openai"

    def __init__(self, http: httpx.AsyncClient, *, base_url: str, api_key: SecretStr | str | None = None,
                 timeout: float | None = None) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._timeout = timeout

    async def complete(self, request: LLMRequest) -> LLMResponse:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        body = await post_json(self._http, self.name, self._url, request_to_wire(request), headers,
                               timeout=self._timeout, secret=self._key)
        return response_from_wire(body, request)
