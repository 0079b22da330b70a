"""Turn a scripted ``Reply`` into a well-formed HTTP answer in either wire format."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .matching import RequestView, Wire
from .script import Fault, Reply

_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}


@dataclass(frozen=True)
class Counts:
    prompt: int
    completion: int
    total: int
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


@dataclass
class HttpAnswer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    counts: Counts | None = None
    """The usage a successful reply carries: what a quota charges and ``/stats`` counts as served."""
    events: list[bytes] | None = None
    """Set for a streamed answer: Server-Sent Events, sent one by one instead of ``body``."""
    event_delay: float = 0.0


def _tokens(text: str) -> int:
    # A rough 4-characters-per-token estimate: enough for budgets and dashboards in tests.
    return max(1, len(text) // 4)


def prompt_tokens(view: RequestView) -> int:
    """The prompt's size as usage reports it, before any cache or override: what a quota charges up front."""
    return _tokens("".join(view.all_texts))


def reply_text(reply: Reply, view: RequestView) -> str | None:
    if reply.echo:
        return f"echo: {view.last_text}"
    if reply.json_ is not None:
        return json.dumps(reply.json_)
    return reply.content


def _usage(reply: Reply, view: RequestView, text: str | None, cache: tuple[int, int]) -> Counts:
    out = (text or "") + "".join(c.name + c.arguments_text() for c in reply.tool_calls)
    reasoning = _tokens(reply.thinking) if reply.thinking else 0
    read, write = cache
    # The prompt holds at least what the cache read and wrote.
    prompt = max(prompt_tokens(view), read + write)
    completion = _tokens(out) + reasoning
    total = None
    override = reply.usage
    if override is not None:
        prompt = override.prompt_tokens if override.prompt_tokens is not None else prompt
        completion = override.completion_tokens if override.completion_tokens is not None else completion
        read = override.cache_read_tokens if override.cache_read_tokens is not None else read
        write = override.cache_write_tokens if override.cache_write_tokens is not None else write
        reasoning = override.reasoning_tokens if override.reasoning_tokens is not None else reasoning
        total = override.total_tokens
    return Counts(prompt, completion, prompt + completion if total is None else total, read, write, reasoning)


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> HttpAnswer:
    answer = HttpAnswer(status, json.dumps(payload).encode())
    answer.headers.update(headers or {})
    return answer


def error_answer(
    wire: Wire, status: int, message: str, error_type: str | None = None, headers: dict[str, str] | None = None
) -> HttpAnswer:
    kind = error_type or (
        "rate_limit_error" if status == 429 else "api_error" if status >= 500 else "invalid_request_error"
    )
    if wire == "anthropic":
        payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        payload = {"error": {"message": message, "type": kind, "code": None}}
    return _json(status, payload, headers)


def fault_answer(wire: Wire, fault: Fault) -> HttpAnswer:
    headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
    return error_answer(wire, fault.status, fault.message, fault.error_type, headers)


def render(
    wire: Wire, reply: Reply, view: RequestView, serial: int, model: str | None, cache: tuple[int, int] = (0, 0)
) -> HttpAnswer:
    if reply.raw_body is not None:
        status = reply.fault.status if reply.fault else 200
        return HttpAnswer(status, reply.raw_body.encode())
    if reply.fault is not None:
        return fault_answer(wire, reply.fault)
    text = reply_text(reply, view)
    counts = _usage(reply, view, text, cache)
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    model_name = model or view.model
    if wire == "anthropic":
        answer = _json(200, _anthropic_body(reply, text, serial, model_name, finish, counts))
    else:
        answer = _json(200, _openai_body(reply, text, serial, model_name, finish, counts))
    answer.counts = counts
    return answer


def _openai_body(
    reply: Reply, text: str | None, serial: int, model: str, finish: str, counts: Counts
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": reply.refusal}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{serial}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text()},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    usage: dict[str, Any] = {
        "prompt_tokens": counts.prompt,
        "completion_tokens": counts.completion,
        "total_tokens": counts.total,
    }
    if counts.cache_read or counts.cache_write:
        usage["prompt_tokens_details"] = {"cached_tokens": counts.cache_read, "cache_write_tokens": counts.cache_write}
    if counts.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": counts.reasoning}
    return {
        "id": f"chatcmpl-scripted-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def _tool_input(call_arguments: Any) -> Any:
    """Anthropic sends ``input`` as an object; an unparseable scripted string is sent as a string."""
    if not isinstance(call_arguments, str):
        return call_arguments
    try:
        return json.loads(call_arguments)
    except ValueError:
        return call_arguments


def _anthropic_body(
    reply: Reply, text: str | None, serial: int, model: str, finish: str, counts: Counts
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.thinking:
        content.append({"type": "thinking", "thinking": reply.thinking, "signature": f"scripted-{serial}"})
    if text:
        content.append({"type": "text", "text": text})
    for i, call in enumerate(reply.tool_calls):
        content.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{serial}_{i}",
                "name": call.name,
                "input": _tool_input(call.arguments),
            }
        )
    stop = "refusal" if reply.refusal is not None else _ANTHROPIC_STOP.get(finish, finish)
    usage: dict[str, Any] = {
        "input_tokens": max(0, counts.prompt - counts.cache_read - counts.cache_write),
        "output_tokens": counts.completion,
    }
    if counts.cache_read or counts.cache_write:
        usage["cache_read_input_tokens"] = counts.cache_read
        usage["cache_creation_input_tokens"] = counts.cache_write
    if counts.reasoning:
        usage["output_tokens_details"] = {"thinking_tokens": counts.reasoning}
    body: dict[str, Any] = {
        "id": f"msg_scripted_{serial}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if reply.refusal is not None:
        body["stop_details"] = {"type": "refusal", "category": None, "explanation": reply.refusal}
    return body
