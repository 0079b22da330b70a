"""Tool descriptions and the input and output of the tool activity."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..json_schema import parse_json
from .conversation import ConversationRef
from .messages import Message

TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"

Delivery = Literal["retry", "key", "at_most_once"]
"""How a tool call may be repeated after a failure (see docs/tools.md, "Delivery policy").

- ``retry``: read-only or idempotent; Temporal retries it freely.
- ``key``: it takes the idempotency key and dedupes on it; retried with the same key.
- ``at_most_once``: neither; never retried once the request may have reached the
  tool. A call whose outcome is unknown comes back as an error result saying so.
"""

OUTCOME_UNKNOWN = "ToolOutcomeUnknown"
"""``ToolCallResult.error_type`` of an at-most-once call that may or may not have happened."""
TOOL_REMOVED = "ToolRemoved"
"""``error_type`` of a call to a tool its server no longer offers (removed after the run described it)."""


class ToolSchema(BaseModel):
    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""
    output_schema: dict[str, Any] | None = None
    side_effects: bool = False
    """Side-effecting tools get an idempotency key so a retry cannot repeat them."""
    requires_approval: bool = False
    """A person must approve each call (the ``approve`` / ``reject`` Updates) before it runs."""
    delivery: Delivery = "retry"
    source: str = "python"
    """``python`` for the in-process registry, ``mcp:<server>`` for MCP tools."""


class ToolCallInput(BaseModel):
    """Input of the ``tools.call`` activity."""

    name: str
    arguments: str
    """Raw JSON text from the model; the activity parses and validates it."""
    call_id: str
    idempotency_key: str
    """Names the effect, not the attempt: stable across activity retries, worker crashes,
    re-prompts, fallback models and a Temporal reset (``workflows/effects.py``)."""
    delivery: Delivery | None = None
    """Set by the workflow; ``at_most_once`` makes the activity report a failure after the
    request may have been sent as an ``OUTCOME_UNKNOWN`` result instead of raising."""
    store_for: str = Field(default="", exclude_if=lambda owner: not owner)
    """A tool-mode step's call: the run or session (``<workflow id>/<first run id>``, the calling workflow)
    the tool message the model will read (``tool_message``, cut at ``store_cap``) is stored for, as a
    one-message conversation segment bound to it, when its content is at least ``STORED_MESSAGE_MIN_CHARS``
    long; ``ToolCallResult.message_ref`` names it. Empty: not stored."""
    store_cap: int | None = Field(default=None, exclude_if=lambda cap: cap is None)


class ToolCallResult(BaseModel):
    """Output of the ``tools.call`` activity.

    A tool's own failure (bad arguments, a domain error) is ``is_error`` and
    goes back to the model; infrastructure failures raise instead so Temporal
    retries them.
    """

    call_id: str
    name: str
    content: str
    """What the model reads: JSON text of the result, or the error message."""
    is_error: bool = False
    structured: Any = None
    """The validated result value, when the tool returns one and ``content`` is not its JSON text: the
    ``tools.call`` activity leaves it out when parsing ``content`` gives it back (``stored_once``), so a
    result is in history once. Read the value with ``result_value``."""
    error_type: str | None = None
    """``OUTCOME_UNKNOWN`` when the call may or may not have happened, ``TOOL_REMOVED`` when its server no
    longer offers the tool (``is_error`` is then true)."""
    message_ref: ConversationRef | None = Field(default=None, exclude_if=lambda ref: ref is None)
    """With ``ToolCallInput.store_for``: the stored tool message, so the next ``llm.call`` names it
    instead of carrying its content again."""


STORED_MESSAGE_MIN_CHARS = 512
"""A tool message shorter than this goes to the model inline: its reference in the next ``llm.call``
(a ``ConversationRef``, ~250 bytes) plus a store write would cost more than the copy it saves."""


def tool_message(result: ToolCallResult, cap: int | None) -> Message:
    """The tool message the model reads for ``result``: its content, cut at ``cap`` (the workflow and the
    ``tools.call`` activity build it alike, so the stored copy is the message the run keeps)."""
    content = result.content if cap is None else capped_tool_content(result.content, cap)
    return Message(
        role="tool", tool_call_id=result.call_id, name=result.name, content=content, is_error=result.is_error
    )


def stored_once(result: ToolCallResult) -> ToolCallResult:
    """``result`` without ``structured`` when ``content`` is its JSON text (the usual case), so history
    carries the value once; kept when parsing ``content`` would not give the same value back."""
    if result.structured is None or result.is_error:
        return result
    value, why_not = parse_json(result.content)
    if why_not is not None or value != result.structured:
        return result
    return result.model_copy(update={"structured": None})


def result_value(result: ToolCallResult) -> Any:
    """The value of a successful result: ``structured``, else the JSON ``content`` holds, else the text."""
    if result.structured is not None:
        return result.structured
    value, why_not = parse_json(result.content)
    return result.content if why_not is not None else value


def outcome_unknown(call: ToolCallInput, reason: str) -> ToolCallResult:
    """The typed error result of an at-most-once call whose outcome nobody knows."""
    return ToolCallResult(
        call_id=call.call_id,
        name=call.name,
        is_error=True,
        error_type=OUTCOME_UNKNOWN,
        content=(
            f"{OUTCOME_UNKNOWN}: the call to {call.name} may or may not have happened ({reason[:300]}). "
            "It was not retried, because this tool cannot take an idempotency key. "
            "Check its effect before calling it again."
        ),
    )


def tool_removed(call: ToolCallInput, server: str, offered: list[str]) -> ToolCallResult:
    """The typed error result of a call to a tool its server stopped offering after the run began."""
    return ToolCallResult(
        call_id=call.call_id,
        name=call.name,
        is_error=True,
        error_type=TOOL_REMOVED,
        content=(
            f"{TOOL_REMOVED}: unknown tool {call.name!r}: the server {server!r} does not (or no longer) offer "
            f"it; it was not called. Tools that server offers now: {', '.join(offered[:50]) or 'none'}."
        ),
    )


def catalog_digest(tools: list[ToolSchema]) -> str:
    """``sha256:<hex>`` of the schemas a run was given, whatever their order: an audit compares it with a
    catalog to know the run saw exactly those tools (pure, so a workflow computes it)."""
    canonical = sorted((t.model_dump(mode="json") for t in tools), key=lambda t: t["name"])
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class ToolsDescribeInput(BaseModel):
    """Input of the ``tools.describe`` activity: the names an agent may use."""

    names: list[str]


def capped_tool_content(content: str, limit: int) -> str:
    """``content`` cut to ``limit`` characters, with a notice of what was cut and how to avoid it."""
    if len(content) <= limit:
        return content
    return (
        content[:limit]
        + f"\n[tool result truncated: showing the first {limit} of {len(content)} characters. Ask for less "
        '(filters, fewer fields, smaller pages), or run this agent in code mode (mode = "code"), where a '
        "program processes large results without them passing through the model.]"
    )
