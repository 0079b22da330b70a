"""The script file that drives the scripted model server (a test double).

A script answers each request with one ``Reply``, chosen in this order:

1. the first ``rules`` entry whose ``match`` fits the request's last message
   and whose ``times`` is not yet spent;
2. otherwise the next unused entry of ``replies`` (consumed in order);
3. otherwise ``default``;
4. otherwise a 500 saying that nothing matched, so a test fails visibly.

The format is documented with examples in ``docs/scripted-model.md``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_STRICT = ConfigDict(extra="forbid")


class ScriptToolCall(BaseModel):
    model_config = _STRICT

    name: str
    arguments: dict[str, Any] | list[Any] | str = Field(default_factory=dict)
    """An object is sent as its JSON text; a string is sent verbatim, so it can be invalid JSON."""
    id: str | None = None
    """Defaults to a generated ``call_<n>`` (OpenAI) or ``toolu_<n>`` (Anthropic) id."""

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


class UsageOverride(BaseModel):
    """Replaces the computed usage figures; unset fields keep the computed value."""

    model_config = _STRICT

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    """OpenAI wire only: Anthropic has no total, clients compute it."""
    cache_read_tokens: int | None = None
    """Replaces the simulated prompt-cache read (see ``docs/scripted-model.md``)."""
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


class Fault(BaseModel):
    """An HTTP error reply in the wire format's error shape."""

    model_config = _STRICT

    status: int = Field(default=500, ge=400, le=599)
    message: str = "injected fault"
    retry_after: str | None = None
    """Sent verbatim as the ``Retry-After`` header: seconds (``"2"``) or an HTTP date."""
    error_type: str | None = None

    @field_validator("retry_after", mode="before")
    @classmethod
    def _number_to_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) else value


class StreamShape(BaseModel):
    """How a reply is streamed when the request asks for ``stream: true`` (SSE)."""

    model_config = _STRICT

    chunk_chars: int = Field(default=8, ge=1)
    """Text and tool arguments are cut into deltas of this many characters."""
    delay_seconds: float = Field(default=0.0, ge=0, le=10)
    """Sleep between events: lets a test see deltas arrive over time."""
    fault: Literal["malformed", "truncated", "no_usage", "error_event", "cut_after_finish"] | None = None
    """``malformed``: one event in the middle is not JSON; ``truncated``: the connection closes halfway,
    without the closing events; ``no_usage``: no usage is sent (OpenAI: no usage chunk; Anthropic:
    ``message_delta`` without ``usage``); ``error_event``: an error event halfway (``error``), then the
    connection closes, as vLLM and LiteLLM report a failing upstream; ``cut_after_finish``: the connection
    closes right after the finish (OpenAI: the ``finish_reason`` chunk, before usage and ``[DONE]``;
    Anthropic: ``message_delta``, before ``message_stop``)."""
    error: Fault = Field(
        default_factory=lambda: Fault(status=503, message="upstream overloaded", error_type="server_error")
    )
    """What an ``error_event`` carries: OpenAI-compatible ``{"error": {"message", "type", "code": status}}``;
    Anthropic ``{"type": "error", "error": {"type", "message"}}``."""


class Reply(BaseModel):
    """One answer. At most one of ``content``, ``json``, ``echo`` gives the text."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    content: str | None = None
    json_: Any = Field(default=None, alias="json")
    """A JSON final answer: sent as its JSON text in the message content."""
    echo: bool = False
    """Answer with the last message's text, prefixed ``echo: ``."""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    """OpenAI spelling (``stop``, ``tool_calls``, ``length``, ``content_filter``) is mapped for Anthropic;
    any other value (``pause_turn``, ``model_context_window_exceeded``, ...) is sent verbatim."""
    refusal: str | None = None
    """A refusal: OpenAI ``message.refusal``; Anthropic ``stop_reason: refusal`` with this explanation."""
    thinking: str | None = None
    """Reasoning: an Anthropic ``thinking`` block; counted as reasoning tokens on both wires."""
    usage: UsageOverride | None = None
    delay_seconds: float = Field(default=0.0, ge=0)
    fault: Fault | None = None
    raw_body: str | None = None
    """Sent verbatim (status 200 unless ``fault`` says otherwise): a malformed body."""
    stream: StreamShape = Field(default_factory=StreamShape)
    """Used only when the request asks for a stream."""
    fill: bool = False
    """Replace ``{name}`` in ``content``, ``json`` strings and tool-call arguments with the named
    groups of the rule's ``regex`` match: one rule answers many requests (the offline model does)."""

    @model_validator(mode="after")
    def _one_text_source(self) -> Reply:
        sources = [self.content is not None, self.json_ is not None, self.echo]
        if sum(sources) > 1:
            raise ValueError("a reply takes at most one of content, json, echo")
        return self


class Match(BaseModel):
    """Conditions on the request; all given ones must hold."""

    model_config = _STRICT

    role: Literal["system", "user", "assistant", "tool"] | None = None
    """Role of the last message; an Anthropic user turn made of tool results counts as ``tool``."""
    contains: str | None = None
    """Substring of the last message's text."""
    regex: str | None = None
    """``re.search`` pattern on the last message's text."""
    tool_result_for: str | None = None
    """The request ends with a tool result for this tool name."""
    any_contains: str | None = None
    """Substring of any message's text, system prompt included."""
    model: str | None = None
    """The request's model name, exactly."""

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            re.compile(value)
        return value


class Rule(BaseModel):
    model_config = _STRICT

    match: Match = Field(default_factory=Match)
    reply: Reply
    times: int | None = Field(default=None, ge=1)
    """Apply to the first N matching requests only; unset means always."""


class Quota(BaseModel):
    """A provider rate limit on one model, enforced with a real 429 (see ``docs/scripted-model.md``).

    Limits count per window of ``window_seconds`` (a minute unless a test shortens it).
    Tokens are charged when a request arrives (its prompt, estimated as in ``usage``, plus its
    ``max_tokens``) and corrected to the usage actually sent once the reply is rendered.
    """

    model_config = _STRICT

    requests_per_minute: int | None = Field(default=None, ge=1, strict=True)
    input_tokens_per_minute: int | None = Field(default=None, ge=1, strict=True)
    output_tokens_per_minute: int | None = Field(default=None, ge=1, strict=True)
    tokens_per_minute: int | None = Field(default=None, ge=1, strict=True)
    """Input and output together, as OpenAI counts TPM."""
    concurrent_requests: int | None = Field(default=None, ge=1, strict=True)
    window: Literal["sliding", "fixed"] = "sliding"
    """``sliding``: the last ``window_seconds``; ``fixed``: windows that start every ``window_seconds``."""
    window_seconds: float = Field(default=60.0, gt=0, le=3600, strict=True)

    @model_validator(mode="after")
    def _some_limit(self) -> Quota:
        if all(
            v is None
            for v in (
                self.requests_per_minute,
                self.input_tokens_per_minute,
                self.output_tokens_per_minute,
                self.tokens_per_minute,
                self.concurrent_requests,
            )
        ):
            raise ValueError(
                "a quota needs at least one limit: requests_per_minute, input_tokens_per_minute, "
                "output_tokens_per_minute, tokens_per_minute or concurrent_requests"
            )
        return self


ANY_MODEL = "*"
"""The ``quotas`` key for every model without a quota of its own (each still counted apart)."""


class Script(BaseModel):
    model_config = _STRICT

    rules: list[Rule] = Field(default_factory=list)
    replies: list[Reply] = Field(default_factory=list)
    default: Reply | None = None
    api_key: str | None = None
    """When set, requests must carry this key (Bearer or ``x-api-key``) or get a 401."""
    model: str | None = None
    """Model name reported in replies; defaults to the request's model."""
    quotas: dict[str, Quota] = Field(default_factory=dict)
    """Rate limits by the request's model name (``"*"``: any other model); beyond one, a 429."""

    @classmethod
    def load(cls, path: str | Path) -> Script:
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
