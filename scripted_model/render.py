"""Turn a scripted ``Reply`` into a well-formed HTTP answer in either wire format."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .matching import RequestView, Wire
from .script import Fault, Reply

_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}


@dataclass
class HttpAnswer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})


def _tokens(text: str) -> int:
    # A rough 4-characters-per-token estimate: enough for budgets and dashboards in tests.
    return max(1, len(text) // 4)


def reply_text(reply: Reply, view: RequestView) -> str | None:
    if reply.echo:
        return f"echo: {view.last_text}"
    if reply.json_ is not None:
        return json.dumps(reply.json_)
    return reply.content


def _usage(reply: Reply, view: RequestView, text: str | None) -> tuple[int, int, int]:
    out = (text or "") + "".join(c.name + c.arguments_text() for c in reply.tool_calls)
    prompt = _tokens("".join(view.all_texts))
    completion = _tokens(out)
    override = reply.usage
    if override is not None:
        prompt = override.prompt_tokens if override.prompt_tokens is not None else prompt
        completion = override.completion_tokens if override.completion_tokens is not None else completion
        if override.total_tokens is not None:
            return prompt, completion, override.total_tokens
    return prompt, completion, prompt + completion


def _json(status: int, payload: Any, headers: dict[str, str] | None = None) -> HttpAnswer:
    answer = HttpAnswer(status, json.dumps(payload).encode())
    answer.headers.update(headers or {})
    return answer


def error_answer(wire: Wire, status: int, message: str, error_type: str | None = None,
                 headers: dict[str, str] | None = None) -> HttpAnswer:
    kind = error_type or ("rate_limit_error" if status == 429 else "api_error" if status >= 500 else "invalid_request_error")
    if wire == "anthropic":
        payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        payload = {"error": {"message": message, "type": kind, "code": None}}
    return _json(status, payload, headers)


def fault_answer(wire: Wire, fault: Fault) -> HttpAnswer:
    headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
    return error_answer(wire, fault.status, fault.message, fault.error_type, headers)


def render(wire: Wire, reply: Reply, view: RequestView, serial: int, model: str | None) -> HttpAnswer:
    if reply.raw_body is not None:
        status = reply.fault.status if reply.fault else 200
        return HttpAnswer(status, reply.raw_body.encode())
    if reply.fault is not None:
        return fault_answer(wire, reply.fault)
    text = reply_text(reply, view)
    prompt, completion, total = _usage(reply, view, text)
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    model_name = model or view.model
    if wire == "anthropic":
        return _json(200, _anthropic_body(reply, text, serial, model_name, finish, prompt, completion))
    return _json(200, _openai_body(reply, text, serial, model_name, finish, prompt, completion, total))


def _openai_body(reply: Reply, text: str | None, serial: int, model: str, finish: str,
                 prompt: int, completion: int, total: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{serial}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text()},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-scripted-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total},
    }


def _tool_input(call_arguments: Any) -> Any:
    """Anthropic sends ``input`` as an object; an unparseable scripted string is sent as a string."""
    if not isinstance(call_arguments, str):
        return call_arguments
    try:
        return json.loads(call_arguments)
    except ValueError:
        return call_arguments


def _anthropic_body(reply: Reply, text: str | None, serial: int, model: str, finish: str,
                    prompt: int, completion: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for i, call in enumerate(reply.tool_calls):
        content.append(
            {"type": "tool_use", "id": call.id or f"toolu_{serial}_{i}", "name": call.name,
             "input": _tool_input(call.arguments)}
        )
    return {
        "id": f"msg_scripted_{serial}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _ANTHROPIC_STOP.get(finish, finish),
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": completion},
    }
