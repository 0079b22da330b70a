"""Searching for values: candidate instances of a schema, witnesses, and counterexamples.

Candidates need not be valid; every value is checked with ``jsonschema`` before it is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .bounds import _number_points
from .results import _R, _refuted, _unproven
from .sides import _deref, _Side
from .vocabulary import _ALL_TYPES, _FORMAT_SAMPLES, _MAX_ENUMERATED, _is_false, _is_true, _normalize, _types

_NONE = object()


def _prop_schema(node: dict[str, Any], name: str) -> Any:
    props = node.get("properties", {})
    if isinstance(props, dict) and name in props:
        return props[name]
    return node.get("additionalProperties", True)


def _fresh_key(taken: set[str]) -> str:
    key, n = "extra", 0
    while key in taken:
        n += 1
        key = f"extra_{n}"
    return key


class _Search:
    """Looks for values: candidates of a schema, witnesses, and counterexamples."""

    def __init__(self, output_schema: Any, input_schema: Any) -> None:
        self.a = _Side(output_schema)
        self.b = _Side(input_schema)

    # Candidate values of a schema: not necessarily valid, callers filter them.

    def candidates(self, node: Any, hint: Any = None, depth: int = 0) -> Iterator[Any]:
        if depth > 8:
            return
        node, _, bad = _deref(self.a, node, (), "$")
        if bad is not None or _is_false(node):
            return
        if _is_true(node):
            yield from (None, True, 0, 0.5, "", "a", [], {})
            return
        node = _normalize(node)
        if "const" in node:
            yield node["const"]
            return
        if isinstance(node.get("enum"), list):
            yield from node["enum"][:_MAX_ENUMERATED]
            return
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(node.get(key), list):
                for branch in node[key]:
                    yield from self.candidates(branch, hint, depth + 1)
                return
        h = hint if isinstance(hint, dict) else {}
        for t in sorted(_types(node), key=_ALL_TYPES.index):
            if t == "null":
                yield None
            elif t == "boolean":
                yield from (True, False)
            elif t in ("integer", "number"):
                for p in _number_points((node, h)):
                    if t == "integer":
                        if float(p).is_integer():
                            yield int(p)
                    else:
                        yield p
            elif t == "string":
                yield from self._string_candidates(node, h)
            elif t == "array":
                yield from self._array_candidates(node, h, depth)
            elif t == "object":
                obj = self.object_witness(node, depth)
                if obj is not None:
                    yield obj

    def _string_candidates(self, node: dict[str, Any], h: dict[str, Any]) -> Iterator[str]:
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt in _FORMAT_SAMPLES:
            yield _FORMAT_SAMPLES[fmt]
        lengths = {0, 1, 2}
        for n in (node, h):
            lo, hi = n.get("minLength"), n.get("maxLength")
            if isinstance(lo, int):
                lengths.update({lo, lo + 1, lo - 1})
            if isinstance(hi, int):
                lengths.update({hi, hi + 1, hi - 1})
        for length in sorted(x for x in lengths if 0 <= x <= 10_000):
            yield "a" * length
        yield from ("0", "A", " ", "-", "a b", "hello")

    def _array_candidates(self, node: dict[str, Any], h: dict[str, Any], depth: int) -> Iterator[list[Any]]:
        items = node.get("items", True)
        if not isinstance(items, dict | bool):
            return
        witnesses: list[Any] = []
        for c in self.candidates(items, h.get("items"), depth + 1):
            if c not in witnesses and self.a.valid(items, c, strict=True):
                witnesses.append(c)
            if len(witnesses) >= 3:
                break
        lengths = {0, 1, 2}
        for n in (node, h):
            lo, hi = n.get("minItems"), n.get("maxItems")
            if isinstance(lo, int):
                lengths.update({lo, lo - 1})
            if isinstance(hi, int):
                lengths.update({hi, hi + 1})
        for length in sorted(x for x in lengths if 0 <= x <= 1000):
            if length == 0:
                yield []
            elif witnesses:
                yield [witnesses[0]] * length
                if len(witnesses) >= length:
                    yield witnesses[:length]

    def witness(self, node: Any, depth: int = 0) -> tuple[bool, Any]:
        """Some value valid against ``node`` (output side): ``(found, value)``."""
        for c in self.candidates(node, None, depth):
            if self.a.valid(node, c, strict=True):
                return True, c
        return False, None

    def object_witness(self, node: dict[str, Any], depth: int = 0) -> dict[str, Any] | None:
        obj: dict[str, Any] = {}
        for name in node.get("required", []) if isinstance(node.get("required"), list) else []:
            found, value = self.witness(_prop_schema(node, name), depth + 1)
            if not found:
                return None
            obj[name] = value
        return obj

    def search(self, a: Any, b: Any, hint: Any = None) -> Any:
        """A value valid against ``a`` (strict) and invalid against ``b`` (loose); ``_NONE`` if none found."""
        for c in self.candidates(a, hint if hint is not None else b):
            if self.a.valid(a, c, strict=True) is True and self.b.valid(b, c, strict=False) is False:
                return c
        return _NONE

    def pick(self, a: Any, b: Any, values: Iterable[Any]) -> Any:
        for v in values:
            if self.a.valid(a, v, strict=True) is True and self.b.valid(b, v, strict=False) is False:
                return v
        return _NONE

    def gap(self, a: Any, b: Any, path: str, reason: str, hint: Any = None) -> _R:
        v = self.search(a, b, hint)
        if v is _NONE:
            return _unproven(path, reason)
        return _refuted(path, reason, v)
