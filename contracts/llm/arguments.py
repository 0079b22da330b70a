"""Parsing a tool call's ``arguments`` text: shared by the ``llm.call``
postcondition and by the tool clients that must read arguments exactly as the
contract did.
"""

from __future__ import annotations

import json
from typing import Any

from ..json_schema import describe, json_type_name, parse_json


def parse_tool_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse a tool call's ``arguments``: ``(object, None)`` or ``(None, why not)``.

    Blank text means "no arguments" (some OpenAI-compatible servers send ``""``
    for a call without parameters), so it parses as ``{}``.
    """
    if isinstance(raw, str) and not raw.strip():
        return {}, None
    value, error = parse_json(raw)
    if error is not None:
        return None, error
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {json_type_name(value)} {describe(value)}"
    return value, None


__all__ = ["parse_tool_arguments"]


def canonical_arguments(arguments: str) -> str:
    """JSON text with sorted keys and no spaces, so key order and spacing never change a key
    (an effect key, or a counterfactual replay's match against a recorded call)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
