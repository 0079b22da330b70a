"""A rendered answer as Server-Sent Events, for requests that ask for ``stream: true``.

The events are cut from the same body the non-streaming reply sends, so a
client that assembles them gets that body back: OpenAI ``chat.completion.chunk``
events (usage in a last chunk when ``stream_options.include_usage``), then
``data: [DONE]``; Anthropic ``message_start``, ``content_block_start`` /
``_delta`` / ``_stop``, ``message_delta``, ``message_stop``. A ``StreamShape``
fault breaks the stream on purpose (a bad event, a cut, no usage, an error event).
"""

from __future__ import annotations

import json
from typing import Any

from .script import StreamShape


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def openai_events(body: dict[str, Any], shape: StreamShape, include_usage: bool) -> list[bytes]:
    choice = body["choices"][0]
    message = choice["message"]
    envelope = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    events = [chunk({"role": "assistant", "content": ""})]
    if message.get("refusal"):
        events += [chunk({"refusal": p}) for p in _pieces(message["refusal"], shape.chunk_chars)]
    if message.get("content"):
        events += [chunk({"content": p}) for p in _pieces(message["content"], shape.chunk_chars)]
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
        events += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in _pieces(function["arguments"], shape.chunk_chars)
            if p
        ]
    events.append(chunk({}, choice["finish_reason"]))
    if shape.fault == "cut_after_finish":
        return events
    if include_usage and shape.fault != "no_usage":
        events.append(_sse({**envelope, "choices": [], "usage": body["usage"]}))
    events.append(b"data: [DONE]\n\n")
    error = shape.error
    return _broken(
        events,
        shape,
        _sse(
            {
                "error": {
                    "message": error.message,
                    "type": error.error_type or "server_error",
                    "param": None,
                    "code": error.status,
                }
            }
        ),
    )


def anthropic_events(body: dict[str, Any], shape: StreamShape) -> list[bytes]:
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    start.pop("stop_details", None)
    events = [_sse({"type": "message_start", "message": start}, "message_start")]
    opening: dict[str, Any]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        if kind == "text":
            opening, deltas = (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": p} for p in _pieces(block["text"], shape.chunk_chars)],
            )
        elif kind == "thinking":
            opening, deltas = (
                {"type": "thinking", "thinking": "", "signature": ""},
                [
                    *({"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"], shape.chunk_chars)),
                    {"type": "signature_delta", "signature": block["signature"]},
                ],
            )
        else:
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, shape.chunk_chars)]
        events.append(
            _sse({"type": "content_block_start", "index": index, "content_block": opening}, "content_block_start")
        )
        events += [
            _sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta") for d in deltas
        ]
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
    }
    if "stop_details" in body:
        delta["delta"]["stop_details"] = body["stop_details"]
    if shape.fault != "no_usage":
        delta["usage"] = {
            "output_tokens": usage["output_tokens"],
            **({"output_tokens_details": usage["output_tokens_details"]} if "output_tokens_details" in usage else {}),
        }
    events.append(_sse(delta, "message_delta"))
    if shape.fault == "cut_after_finish":
        return events
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    error = shape.error
    return _broken(
        events,
        shape,
        _sse({"type": "error", "error": {"type": error.error_type or "api_error", "message": error.message}}, "error"),
    )


def _broken(events: list[bytes], shape: StreamShape, error_event: bytes) -> list[bytes]:
    middle = len(events) // 2
    if shape.fault == "truncated":
        return events[:middle]
    if shape.fault == "error_event":
        return [*events[:middle], error_event]
    if shape.fault == "malformed":
        event = b"event: content_block_delta\n" if events[middle].startswith(b"event:") else b""
        return [*events[:middle], event + b"data: {not json\n\n", *events[middle + 1 :]]
    return events


__all__ = ["anthropic_events", "openai_events"]
