"""Parsing a tool call's ``arguments`` text: shared by the ``llm.call``
postcondition and by the tool clients that must read arguments exactly as the
contract did.
"""

from __future__ import annotations

import decimal
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
    """JSON text canonical by value: sorted keys, no spaces, escapes decoded, and a number that is
    a whole number written as an integer (``1``, ``1.0``, ``1e0`` and ``1.00`` are one value in JSON, so
    one key: an effect key, or a counterfactual replay's match against a recorded call). Text that is not
    JSON is kept as it is."""
    try:
        value = json.loads(arguments, parse_float=_number, parse_constant=_not_json)
    except ValueError:
        return arguments
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _number(text: str) -> int | float:
    value = float(text)
    # Exact: a float that is a whole number, or a decimal too long for a float but whole (1.0000000000000001
    # stays a float; 10000000000000000000.0 becomes that integer).
    if value.is_integer():
        whole = decimal.Decimal(text)
        if whole == whole.to_integral_value():
            return int(whole)
    return value


def _not_json(text: str) -> object:
    raise ValueError(f"{text} is not a JSON value")


RECORD_CHARS = 1000
"""Characters of a call's arguments and result an effect record keeps."""


def cap(text: str, limit: int = RECORD_CHARS) -> str:
    """``text`` as a record keeps it: whole, or its first ``limit`` characters marked truncated."""
    return text if len(text) <= limit else text[:limit] + " [truncated]"
