"""The JSON Schema keywords the prover models, ignores or refuses, and reading a node's shape."""

from __future__ import annotations

from typing import Any

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "$schema",
        "$id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        # OpenAPI's, emitted by pydantic beside oneOf; jsonschema ignores it.
        "discriminator",
    }
)
_CONTAINERS = frozenset({"$defs", "definitions"})
_COMBINATORS = ("allOf", "anyOf", "oneOf")
# Modelled on both sides.
_SUPPORTED = frozenset(
    {
        "type",
        "enum",
        "const",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "properties",
        "required",
        "additionalProperties",
        "$ref",
        *_COMBINATORS,
    }
)
# Draft 2020-12 keywords that only remove values: ignorable on the output side.
_NARROWING_ONLY = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependentRequired",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedProperties",
        "unevaluatedItems",
        "$dynamicRef",
        "$recursiveRef",
    }
)
_SUPPORTED_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-06/schema",
    }
)
_ALL_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_MAX_DEPTH = 48
_MAX_ENUMERATED = 1000
_FORMAT_SAMPLES = {
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "date": "2024-01-02",
    "date-time": "2024-01-02T03:04:05Z",
    "time": "03:04:05Z",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "regex": "^a$",
    "duration": "P1D",
}


def _validation_keys(node: dict[str, Any]) -> set[str]:
    return {k for k in node if k not in _ANNOTATIONS and k not in _CONTAINERS}


def _normalize(node: Any) -> Any:
    """Split combinators from sibling keywords: ``{type, anyOf}`` is ``allOf[{type}, {anyOf}]``."""
    if not isinstance(node, dict):
        return node
    present = [k for k in _COMBINATORS if k in node]
    if not present:
        return node
    rest = {k: v for k, v in node.items() if k not in present and k not in _ANNOTATIONS and k not in _CONTAINERS}
    if present == ["allOf"]:
        return {"allOf": [*node["allOf"], rest]} if rest else node
    parts: list[Any] = [{k: node[k]} for k in present if k != "allOf"]
    parts.extend(node.get("allOf", []))
    if rest:
        parts.append(rest)
    return parts[0] if len(parts) == 1 else {"allOf": parts}


def _is_true(node: Any) -> bool:
    return node is True or (isinstance(node, dict) and not _validation_keys(node))


def _is_false(node: Any) -> bool:
    return node is False


def _types(node: dict[str, Any]) -> set[str]:
    t = node.get("type")
    if t is None:
        return set(_ALL_TYPES)
    return {t} if isinstance(t, str) else set(t)


def _accepts_type(types: set[str], t: str) -> bool:
    return t in types or (t == "integer" and "number" in types)
