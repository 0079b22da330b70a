"""Streamed answers: Server-Sent Events in, the non-streaming body out.

Each provider streams through its official SDK (``stream=True``) and feeds the
events to an assembler here, which rebuilds the body the same call would have
returned without streaming. That body then goes through the provider's one
``response_from_wire``, so contracts, usage and tool calls are checked on
exactly what a non-streamed call gives. Text deltas go to ``on_text`` as they
arrive; they are advisory, the assembled message is what counts.

    a stream event that is not JSON / not an object    -> NonRetryableProviderError (malformed)
    the stream ends before its last event (truncated)  -> RetryableProviderError
      (OpenAI: before ``[DONE]``, even after the finish chunk when usage was still due)
    the stream ended properly but carried no usage     -> NonRetryableProviderError (malformed)
    a provider error event in the middle of the stream -> by what it reports (``errors.stream_error``):
      overloaded, a server error, rate limited, or unnamed -> RetryableProviderError;
      a rejected request (4xx code, invalid_request ...)   -> NonRetryableProviderError

Neither SDK is imported here (``errors.sdk_errors``): a worker streaming from one provider never loads
the other's. ``OpenAIEventStream`` (``openai_stream.py``, on the openai SDK) is importable from here as before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ....contracts.errors import ProviderError, RetryableProviderError
from .errors import (
    DEFAULT_RETRY_AFTER_CAP,
    classify_sdk_error,
    connection_errors,
    malformed,
    sdk_errors,
    status_errors,
    stream_error,
)

if TYPE_CHECKING:
    import openai

    from .openai_stream import OpenAIEventStream

TextSink = Callable[[str], None]


class OpenAIChunks:
    """Chat Completions ``chat.completion.chunk`` events (``stream_options.include_usage``)."""

    def __init__(self) -> None:
        self.envelope: dict[str, Any] = {}
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: Any = None
        self.usage: Any = None

    def add(self, chunk: Any) -> str:
        """Take one chunk; returns its answer text (may be empty)."""
        chunk = _object("openai", chunk, "a chunk")
        self.envelope.update({k: chunk[k] for k in ("id", "model", "created") if k in chunk})
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        text = ""
        for choice in _list("openai", chunk.get("choices") or [], "choices"):
            choice = _object("openai", choice, "a choice")
            if choice.get("index", 0) != 0:
                continue
            delta = _object("openai", choice.get("delta") or {}, "a delta")
            if isinstance(delta.get("content"), str):
                self.content.append(delta["content"])
                text += delta["content"]
            if isinstance(delta.get("refusal"), str):
                self.refusal.append(delta["refusal"])
            for call in _list("openai", delta.get("tool_calls") or [], "tool_calls"):
                self._add_call(_object("openai", call, "a tool call delta"))
            if choice.get("finish_reason") is not None:
                self.finish = choice["finish_reason"]
        return text

    def _add_call(self, call: dict[str, Any]) -> None:
        slot = self.calls.setdefault(
            call.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if call.get("id"):
            slot["id"] = call["id"]
        function = _object("openai", call.get("function") or {}, "a tool call's function")
        if function.get("name") and not slot["function"]["name"]:
            slot["function"]["name"] = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot["function"]["arguments"] += arguments
        elif arguments is not None:  # a server sending the whole object at once
            slot["function"]["arguments"] += json.dumps(arguments)

    def body(self, complete: bool = True) -> dict[str, Any]:
        """The assembled body; ``complete`` says whether the stream ended with ``[DONE]`` (not cut)."""
        if self.finish is None:
            raise RetryableProviderError("openai stream ended before its finish_reason (truncated)")
        if self.usage is None and not complete:
            # Usage comes after the finish chunk: a cut there is a cut, not a server that sends none.
            raise RetryableProviderError(
                "openai stream ended after its finish_reason but before usage and [DONE] (truncated)"
            )
        if self.usage is None:
            raise malformed(
                "openai",
                "the stream carried no usage (stream_options.include_usage is not honoured; "
                "turn stream_tokens off for this server)",
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) or None,
            "refusal": "".join(self.refusal) or None,
        }
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return {
            **self.envelope,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
            "usage": self.usage,
        }


class AnthropicEvents:
    """Messages stream events: ``message_start`` ... ``message_stop``."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, list[str]] = {}
        self.delta: dict[str, Any] = {}
        self.usage_seen = False
        self.stopped = False

    def add(self, event: Any) -> str:
        event = _object("anthropic", event, "an event")
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(_object("anthropic", event.get("message"), "message_start.message"))
        elif kind == "content_block_start":
            block = dict(_object("anthropic", event.get("content_block"), "content_block"))
            self.blocks[event.get("index", len(self.blocks))] = block
            if block.get("type") == "tool_use":
                self.partial[event.get("index", len(self.blocks) - 1)] = []
        elif kind == "content_block_delta":
            return self._add_delta(event.get("index", 0), _object("anthropic", event.get("delta"), "delta"))
        elif kind == "content_block_stop":
            self._close_block(event.get("index", 0))
        elif kind == "message_delta":
            self.delta.update(_object("anthropic", event.get("delta") or {}, "message_delta.delta"))
            if isinstance(event.get("usage"), dict):
                self.usage_seen = True
                self._require_start()["usage"] = {**self._require_start().get("usage", {}), **event["usage"]}
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def _require_start(self) -> dict[str, Any]:
        if self.message is None:
            raise malformed("anthropic", "a stream event came before message_start")
        return self.message

    def _add_delta(self, index: int, delta: dict[str, Any]) -> str:
        block = self.blocks.get(index)
        if block is None:
            raise malformed("anthropic", f"a delta for content block {index}, which was never started")
        kind = delta.get("type")
        text = delta.get("text")
        if kind == "text_delta" and isinstance(text, str):
            block["text"] = block.get("text", "") + text
            return text
        if kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature", "")
        elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self.partial.setdefault(index, []).append(delta["partial_json"])
        return ""

    def _close_block(self, index: int) -> None:
        parts = self.partial.pop(index, None)
        if parts is None or index not in self.blocks:
            return
        raw = "".join(parts)
        # As in a non-streamed answer: an object is the input; anything else is kept verbatim for the postcondition.
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except ValueError:
            parsed = raw
        self.blocks[index]["input"] = parsed if isinstance(parsed, dict) else raw

    def body(self, complete: bool = True) -> dict[str, Any]:
        """The assembled body (``message_stop`` is what says the stream was not cut)."""
        if not self.stopped:
            raise RetryableProviderError("anthropic stream ended before message_stop (truncated)")
        if not self.usage_seen:
            raise malformed("anthropic", "the stream's message_delta carried no usage")
        body = {**self._require_start(), **{k: v for k, v in self.delta.items() if k != "type"}}
        body["content"] = [self.blocks[i] for i in sorted(self.blocks)]
        return body


async def read_stream(
    provider: str,
    open_stream: Callable[[], Awaitable[AsyncIterable[Any]]],
    assembler: OpenAIChunks | AnthropicEvents,
    on_text: TextSink,
    *,
    secret: str | None,
    retry_after_cap: float | None = DEFAULT_RETRY_AFTER_CAP,
) -> dict[str, Any]:
    """Open the SDK stream, feed every event to ``assembler``, return the assembled body; failures are typed."""
    secrets = (secret,)
    error: ProviderError
    try:
        stream = await open_stream()
        async for event in stream:
            text = assembler.add(event)
            if text:
                on_text(text)
    except ProviderError:
        raise
    except ValueError as exc:  # the SDK's json.loads of one event
        error = malformed(provider, f"a stream event is not JSON ({exc})", secrets)
    except status_errors() as exc:
        if exc.response.status_code >= 300:  # refused before the stream started
            error = classify_sdk_error(provider, exc, secrets, retry_after_cap)
        else:  # Anthropic's error event: the SDK raises it with the stream's 200
            error = stream_error(provider, exc.body, exc.message, secrets)
    except connection_errors() as exc:
        error = classify_sdk_error(provider, exc, secrets, retry_after_cap)
    except _openai_errors() as exc:  # an OpenAI-compatible server's {"error": ...} event inside the stream
        error = stream_error(provider, exc.body, exc.message, secrets)
    except Exception as exc:  # noqa: BLE001 - the one edge: everything the SDK raises is classified
        error = classify_sdk_error(provider, exc, secrets, retry_after_cap)
    else:
        return assembler.body(complete=getattr(stream, "done", True))
    # Raised outside the except block: no SDK exception (whose text may hold the key) is chained into history.
    raise error


def _openai_errors() -> tuple[type[openai.APIError], ...]:
    return sdk_errors("APIError", ("openai",))


def _object(provider: str, value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise malformed(provider, f"{what} in the stream is a JSON {type(value).__name__}, expected an object")
    return value


def _list(provider: str, value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise malformed(provider, f"{what} in the stream is a JSON {type(value).__name__}, expected a list")
    return value


def __getattr__(name: str) -> Any:
    # OpenAIEventStream subclasses the openai SDK's stream: it is defined (and the SDK imported) only when asked for.
    if name == "OpenAIEventStream":
        from .openai_stream import OpenAIEventStream

        return OpenAIEventStream
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AnthropicEvents", "OpenAIChunks", "OpenAIEventStream", "TextSink", "read_stream"]
