"""A wire-neutral view of a request, and rule matching on it.

Both wire formats are reduced to the few facts a rule can test, so one script
drives an OpenAI-compatible client and an Anthropic client alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .script import Match

Wire = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class RequestView:
    model: str
    last_role: str
    last_text: str
    trailing_tool_results: list[str] = field(default_factory=list)
    """Tool names answered by the tool results at the end of the conversation."""
    all_texts: list[str] = field(default_factory=list)


def _text_of(content: Any) -> str:
    """Plain text of a content value: a string, or a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif "content" in block:
                    parts.append(_text_of(block["content"]))
        return "\n".join(parts)
    return ""


def view_openai(body: dict[str, Any]) -> RequestView:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    names: dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict):
                names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
    trailing: list[str] = []
    trailing_texts: list[str] = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        trailing.insert(0, names.get(str(m.get("tool_call_id")), m.get("name") or ""))
        trailing_texts.insert(0, _text_of(m.get("content")))
    last = messages[-1] if messages else {}
    last_text = "\n".join(trailing_texts) if trailing else _text_of(last.get("content"))
    return RequestView(
        model=str(body.get("model", "")),
        last_role=str(last.get("role", "")),
        last_text=last_text,
        trailing_tool_results=trailing,
        all_texts=[_text_of(m.get("content")) for m in messages],
    )


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def view_anthropic(body: dict[str, Any]) -> RequestView:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    names: dict[str, str] = {}
    for m in messages:
        for block in _blocks(m):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
    last = messages[-1] if messages else {}
    blocks = _blocks(last)
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    role = str(last.get("role", ""))
    # A user turn that only carries tool results is what OpenAI calls tool messages.
    if results and len(results) == len(blocks):
        role = "tool"
    system = _text_of(body.get("system"))
    return RequestView(
        model=str(body.get("model", "")),
        last_role=role,
        last_text=_text_of(last.get("content")),
        trailing_tool_results=[names.get(str(b.get("tool_use_id")), "") for b in results],
        all_texts=([system] if system else []) + [_text_of(m.get("content")) for m in messages],
    )


def view_of(wire: Wire, body: dict[str, Any]) -> RequestView:
    return view_openai(body) if wire == "openai" else view_anthropic(body)


def matches(match: Match, view: RequestView) -> bool:
    if match.role is not None and match.role != view.last_role:
        return False
    if match.contains is not None and match.contains not in view.last_text:
        return False
    if match.regex is not None and re.search(match.regex, view.last_text) is None:
        return False
    if match.tool_result_for is not None and match.tool_result_for not in view.trailing_tool_results:
        return False
    if match.any_contains is not None and not any(match.any_contains in t for t in view.all_texts):
        return False
    if match.model is not None and match.model != view.model:
        return False
    return True
