"""Is every value an output schema allows accepted by the next input schema?

``check_schema_compat(output_schema, input_schema)`` answers with one verdict:

- **proven**: every instance of the output schema validates against the input
  schema. Only returned when each keyword involved was reasoned about soundly.
- **refuted**: with a concrete counterexample that was checked with
  ``jsonschema``: it validates against the output schema and fails the input
  schema (both at the schemas' roots, so ``$ref``s resolve as at run time).
- **unproven**: with the reason and the JSON path where reasoning stopped
  (a ``pattern`` or ``format`` that differs, a recursive ``$ref``, a keyword
  this checker does not model, ...). Never a disguised "proven".

Why our own checker rather than an existing prover (evaluated on the schemas
pydantic emits, with ``pip download`` and a scratch venv):

- PyPI ``subschema`` (a conservative Draft 2020-12 prover, the best fit on
  paper) requires Python >= 3.12 in every release (0.0.1 to 0.1.0), and pulls
  in ``z3-solver`` and ``jsonschema-rs``. This project runs on 3.11: pip
  refuses to install it.
- PyPI ``jsonsubschema`` (IBM) implements Draft 4 only. On pydantic schemas it
  raised ``SchemaError`` for numeric ``exclusiveMinimum`` (Draft 6+ emitted by
  ``Field(gt=0)``) and ``JsonRefError`` on a recursive model's ``$defs``; it
  answers a bare boolean with no counterexample and no reason.

So this module decides the fragment pydantic emits -- ``$defs``/``$ref``,
``anyOf`` for ``Optional``, ``enum``/``const``, ``type`` lists, nested objects
and arrays, ``required``, ``additionalProperties`` (bool or schema), numeric
and length bounds -- and says "unproven" for everything else.

Soundness rules (why each shortcut is safe):

- A side's *extra* constraints only shrink the set of output values, so
  narrowing-only keywords on the output side (``not``, ``minProperties``, ...)
  may be ignored when proving. Keywords that change how *other* keywords read
  (``patternProperties`` changes ``additionalProperties``, ``prefixItems``
  changes ``items``) may not, so they make the edge unproven.
- Every keyword on the input side must be shown to be implied; any keyword not
  modelled makes the edge unproven.
- ``anyOf`` on the output side: every branch must be accepted. On the input
  side: the output must fit inside one branch (conservative: a union split
  across branches is reported unproven unless a counterexample is found).
- Finite output sets (``enum``/``const``, and ``null``/``boolean``) are
  decided exactly by validating every value.
- ``format``: jsonschema does not assert it unless asked. Proofs hold under
  both readings: output values are enumerated without format assertion (the
  larger set) and checked against the input with it (the smaller set);
  counterexamples satisfy the output with format assertion and fail the input
  without it.

Pure: no I/O. Validators get an empty ``referencing.Registry`` so a remote
``$ref`` is never fetched; it is simply not resolvable (unproven).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import unquote

import referencing
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import BaseModel

from .errors import InvalidSpecError
from .json_schema import clip, describe, json_path, schema_violations
from .violations import ViolationKind


class Verdict(StrEnum):
    proven = "proven"
    refuted = "refuted"
    unproven = "unproven"


class Counterexample(BaseModel):
    """Wrapped so that ``null`` can itself be a counterexample."""

    value: Any


class CompatResult(BaseModel):
    verdict: Verdict
    reason: str = ""
    path: str = "$"
    """JSON path, inside the value, where the output and input schemas part."""
    counterexample: Counterexample | None = None
    """Only for ``refuted``: validates against the output schema, fails the input schema."""


# --- vocabulary -------------------------------------------------------------

_ANNOTATIONS = frozenset(
    {
        "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly",
        "contentMediaType", "contentEncoding", "contentSchema", "$schema", "$id", "$anchor",
        "$dynamicAnchor", "$vocabulary",
        # OpenAPI's, emitted by pydantic beside oneOf; jsonschema ignores it.
        "discriminator",
    }
)
_CONTAINERS = frozenset({"$defs", "definitions"})
_COMBINATORS = ("allOf", "anyOf", "oneOf")
# Modelled on both sides.
_SUPPORTED = frozenset(
    {
        "type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "minLength", "maxLength", "pattern", "format", "items", "minItems", "maxItems", "uniqueItems",
        "properties", "required", "additionalProperties", "$ref", *_COMBINATORS,
    }
)
# Draft 2020-12 keywords that only remove values: ignorable on the output side.
_NARROWING_ONLY = frozenset(
    {
        "not", "if", "then", "else", "dependentSchemas", "dependentRequired", "minProperties",
        "maxProperties", "propertyNames", "contains", "minContains", "maxContains",
        "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
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


# --- internal results -------------------------------------------------------


@dataclass(frozen=True)
class _R:
    verdict: Verdict
    path: str
    reason: str = ""
    value: Any = None


_PROVEN = _R(Verdict.proven, "$")


def _unproven(path: str, reason: str) -> _R:
    return _R(Verdict.unproven, path, clip(reason))


def _refuted(path: str, reason: str, value: Any) -> _R:
    return _R(Verdict.refuted, path, clip(reason), value)


def _combine(results: Iterable[_R]) -> _R:
    """All must hold: the first refutation wins, else the first unproven, else proven."""
    first_unproven: _R | None = None
    for r in results:
        if r.verdict is Verdict.refuted:
            return r
        if r.verdict is Verdict.unproven and first_unproven is None:
            first_unproven = r
    return first_unproven or _PROVEN


class _Unresolvable(Exception):
    pass


# --- one side of an edge (a root schema and its validators) -----------------


class _Side:
    def __init__(self, root: dict[str, Any] | bool) -> None:
        self.root = root
        cls = validator_for(root, default=Draft202012Validator) if isinstance(root, dict) else Draft202012Validator
        empty = referencing.Registry()
        self._loose: Validator = cls(root, registry=empty)
        self._strict: Validator = cls(root, registry=empty, format_checker=cls.FORMAT_CHECKER)

    def valid(self, node: Any, value: Any, *, strict: bool) -> bool | None:
        """Does ``value`` validate against ``node`` (a subschema of this root)? ``None``: cannot tell."""
        try:
            return (self._strict if strict else self._loose).evolve(schema=node).is_valid(value)
        except RecursionError:
            return None
        except Exception:  # noqa: BLE001 - unresolvable refs, bad regexes: cannot tell, never crash
            return None

    def resolve(self, ref: str) -> Any:
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            raise _Unresolvable(ref)
        node: Any = self.root
        for raw in ref[2:].split("/"):
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise _Unresolvable(ref)
        return node


def _deref(side: _Side, node: Any, chain: tuple[str, ...], path: str) -> tuple[Any, tuple[str, ...], _R | None]:
    """Follow ``$ref`` to a schema node; a ref already on ``chain`` is recursion (unproven)."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        rest = {k: v for k, v in node.items() if k != "$ref" and k not in _ANNOTATIONS}
        if _validation_keys(rest):
            # Draft 2020-12: $ref beside other keywords is a conjunction.
            return {"allOf": [{"$ref": ref}, rest]}, chain, None
        if not isinstance(ref, str):
            return node, chain, _unproven(path, f"$ref {describe(ref)} is not a string")
        if ref in chain:
            return node, chain, _unproven(path, f"recursive $ref {ref!r}: recursion is not analysed statically")
        try:
            node = side.resolve(ref)
        except _Unresolvable:
            return node, chain, _unproven(path, f"$ref {ref!r} is not a local JSON pointer into the schema")
        chain = (*chain, ref)
    return node, chain, None


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


# --- numeric bounds -----------------------------------------------------------


def _lower(node: dict[str, Any]) -> tuple[float, bool] | None:
    """The tighter lower bound as (value, exclusive)."""
    bounds = []
    if isinstance(node.get("minimum"), int | float):
        bounds.append((node["minimum"], False))
    if isinstance(node.get("exclusiveMinimum"), int | float):
        bounds.append((node["exclusiveMinimum"], True))
    return max(bounds, default=None)  # (x, True) > (x, False): exclusive is tighter


def _upper(node: dict[str, Any]) -> tuple[float, bool] | None:
    bounds = []
    if isinstance(node.get("maximum"), int | float):
        bounds.append((node["maximum"], False))
    if isinstance(node.get("exclusiveMaximum"), int | float):
        bounds.append((node["exclusiveMaximum"], True))
    return min(bounds, key=lambda b: (b[0], not b[1]), default=None)


def _int_lower(node: dict[str, Any]) -> int | None:
    b = _lower(node)
    if b is None:
        return None
    return math.floor(b[0]) + 1 if b[1] else math.ceil(b[0])


def _int_upper(node: dict[str, Any]) -> int | None:
    b = _upper(node)
    if b is None:
        return None
    return math.ceil(b[0]) - 1 if b[1] else math.floor(b[0])


def _lower_implies(a: tuple[float, bool] | None, b: tuple[float, bool] | None) -> bool:
    if b is None:
        return True
    if a is None:
        return False
    return a[0] > b[0] or (a[0] == b[0] and (a[1] or not b[1]))


def _upper_implies(a: tuple[float, bool] | None, b: tuple[float, bool] | None) -> bool:
    if b is None:
        return True
    if a is None:
        return False
    return a[0] < b[0] or (a[0] == b[0] and (a[1] or not b[1]))


def _numeric_gap(a: dict[str, Any], b: dict[str, Any], t: str) -> str | None:
    if t == "integer":
        la, lb, ua, ub = _int_lower(a), _int_lower(b), _int_upper(a), _int_upper(b)
        if lb is not None and (la is None or la < lb):
            return f"the output allows integers below the input's lower bound {lb}"
        if ub is not None and (ua is None or ua > ub):
            return f"the output allows integers above the input's upper bound {ub}"
    else:
        if not _lower_implies(_lower(a), _lower(b)):
            return f"the output's lower bound {describe(_lower(a))} is wider than the input's {describe(_lower(b))}"
        if not _upper_implies(_upper(a), _upper(b)):
            return f"the output's upper bound {describe(_upper(a))} is wider than the input's {describe(_upper(b))}"
    mb = b.get("multipleOf")
    if mb is not None:
        ma = a.get("multipleOf")
        # jsonschema divides floats with rounding error, so only whole numbers are reasoned about.
        exact = isinstance(mb, int) and (
            (isinstance(ma, int) and ma % mb == 0) or (t == "integer" and mb == 1)
        )
        if not exact:
            return f"the input requires multipleOf {describe(mb)}, which the output does not guarantee"
    return None


def _number_points(nodes: Iterable[dict[str, Any]]) -> list[float]:
    marks: set[float] = {0, 1, -1}
    for n in nodes:
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            x = n.get(k)
            if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
                marks.add(x)
    points: set[float] = set()
    ordered = sorted(marks)
    for x in ordered:
        points.update({x, x - 1, x + 1, x - 0.5, x + 0.5, math.floor(x), math.ceil(x)})
    for lo, hi in zip(ordered, ordered[1:]):
        points.add((lo + hi) / 2)
    for n in nodes:
        m = n.get("multipleOf")
        if isinstance(m, int | float) and not isinstance(m, bool) and m > 0:
            points.update(round(p / m) * m for p in list(points))
    return sorted(points, key=lambda p: (abs(p), p < 0))


# --- the checker ----------------------------------------------------------------


class _Checker:
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
        for n in sorted(x for x in lengths if 0 <= x <= 10_000):
            yield "a" * n
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
        for n in sorted(x for x in lengths if 0 <= x <= 1000):
            if n == 0:
                yield []
            elif witnesses:
                yield [witnesses[0]] * n
                if len(witnesses) >= n:
                    yield witnesses[:n]

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

    # The subset relation itself.

    def sub(self, a: Any, b: Any, path: str, ach: tuple[str, ...], bch: tuple[str, ...], depth: int) -> _R:
        if depth > _MAX_DEPTH:
            return _unproven(path, f"schemas nest deeper than {_MAX_DEPTH} levels")
        a, ach, bad = _deref(self.a, a, ach, path)
        if bad is not None:
            return bad
        b, bch, bad = _deref(self.b, b, bch, path)
        if bad is not None:
            return bad
        # a0/b0: dereferenced but not rewritten, what validators check values against.
        a0, b0 = a, b
        a, b = _normalize(a), _normalize(b)
        if _is_false(a) or _is_true(b):
            return _PROVEN
        if a is True:
            a = {}
        if _is_false(b):
            return self.gap(a0, b0, path, "the input schema accepts no value at all")
        for side, node in (("output", a), ("input", b)):
            if "$id" in node and depth > 0:
                return _unproven(path, f"the {side} schema has a nested $id, which moves $ref resolution")

        # Finite outputs are decided exactly, whatever the input schema says.
        if ("enum" in a or "const" in a) and not any(k in a for k in _COMBINATORS):
            return self._finite(a0, b0, a, path)

        if "anyOf" in a or "oneOf" in a:
            key = "anyOf" if "anyOf" in a else "oneOf"
            branches = a[key] if isinstance(a[key], list) else []
            r = _combine(self.sub(x, b0, path, ach, bch, depth + 1) for x in branches)
            if r.verdict is Verdict.refuted and self.pick(a0, b0, [r.value]) is _NONE:
                # Valid against its oneOf branch but maybe against a second one too.
                return _unproven(r.path, f"{r.reason} (the candidate is not a valid output value)")
            return r
        if "allOf" in a:
            results = [self.sub(x, b0, path, ach, bch, depth + 1) for x in a["allOf"]]
            if any(r.verdict is Verdict.proven for r in results):
                return _PROVEN  # a conjunct already fits; the others only narrow
            v = self.pick(a0, b0, (r.value for r in results if r.verdict is Verdict.refuted))
            if v is not _NONE:
                return _refuted(path, "the output's allOf admits a value the input rejects", v)
            return _unproven(path, "allOf on the output side: no single conjunct fits the input")

        if "allOf" in b:
            return _combine(self.sub(a0, x, path, ach, bch, depth + 1) for x in b["allOf"])
        if "anyOf" in b or "oneOf" in b:
            key = "anyOf" if "anyOf" in b else "oneOf"
            branches = b[key] if isinstance(b[key], list) else []
            results = [self.sub(a0, x, path, ach, bch, depth + 1) for x in branches]
            if key == "anyOf" and any(r.verdict is Verdict.proven for r in results):
                return _PROVEN
            v = self.pick(a0, b0, (r.value for r in results if r.verdict is Verdict.refuted))
            if v is not _NONE:
                return _refuted(path, f"no {key} branch of the input accepts this output value", v)
            if key == "oneOf":
                return self.gap(
                    a0, b0, path, "oneOf on the input side: exclusivity of its branches is not analysed"
                )
            return self.gap(a0, b0, path, "the output does not fit inside a single anyOf branch of the input")

        unknown_b = sorted(_validation_keys(b) - _SUPPORTED)
        unknown_a = sorted(_validation_keys(a) - _SUPPORTED - _NARROWING_ONLY)
        if unknown_b or unknown_a:
            which = ", ".join([*(f"input {k!r}" for k in unknown_b), *(f"output {k!r}" for k in unknown_a)])
            return self.gap(a0, b0, path, f"keyword(s) not modelled by the checker: {which}")
        for side, node in (("output", a), ("input", b)):
            if not isinstance(node.get("items", {}), dict | bool):
                return _unproven(path, f"the {side} schema uses array-form items (tuples) which is not modelled")

        if "enum" in b or "const" in b:
            return self._into_finite(a0, b0, a, path)
        return self._plain(a0, b0, a, b, path, ach, bch, depth)

    def _finite(self, a0: Any, b0: Any, a: dict[str, Any], path: str) -> _R:
        values = list(a["enum"]) if isinstance(a.get("enum"), list) else []
        if "const" in a:
            values = [a["const"]] if not values or a["const"] in values else []
        if len(values) > _MAX_ENUMERATED:
            return _unproven(path, f"the output enum has more than {_MAX_ENUMERATED} values")
        return self._all_accepted(a0, b0, values, path, "output enum value")

    def _all_accepted(self, a0: Any, b0: Any, values: list[Any], path: str, what: str) -> _R:
        for v in values:
            if self.a.valid(a0, v, strict=False) is False:
                continue  # excluded by the output's other keywords
            ok = self.b.valid(b0, v, strict=True)
            if ok is True:
                continue
            if self.a.valid(a0, v, strict=True) is True and self.b.valid(b0, v, strict=False) is False:
                return _refuted(path, f"{what} {describe(v)} is rejected by the input schema", v)
            return _unproven(path, f"cannot decide whether {what} {describe(v)} is accepted (format or $ref)")
        return _PROVEN

    def _into_finite(self, a0: Any, b0: Any, a: dict[str, Any], path: str) -> _R:
        types = _types(a)
        if types <= {"null", "boolean"}:
            return self._all_accepted(a0, b0, [None, True, False], path, "output value")
        if types <= {"integer"}:
            lo, hi = _int_lower(a), _int_upper(a)
            if lo is not None and hi is not None and hi - lo < _MAX_ENUMERATED:
                return self._all_accepted(a0, b0, list(range(lo, hi + 1)), path, "output value")
        return self.gap(a0, b0, path, "the input accepts a fixed set of values (enum/const) the output is not limited to")

    def _plain(
        self, a0: Any, b0: Any, a: dict[str, Any], b: dict[str, Any], path: str,
        ach: tuple[str, ...], bch: tuple[str, ...], depth: int,
    ) -> _R:
        ta, tb = _types(a), _types(b)
        if not ta <= set(_ALL_TYPES) or not tb <= set(_ALL_TYPES):
            return _unproven(path, "unknown JSON type name")
        if "number" in ta:
            ta.discard("integer")
        results: list[_R] = []
        for t in sorted(ta, key=_ALL_TYPES.index):
            restricted = {**a, "type": t}
            if not _accepts_type(tb, t):
                if t == "number" and "integer" in tb:
                    v = self.pick(a0, b0, (p for p in _number_points((a, b)) if not float(p).is_integer()))
                    results.append(
                        _refuted(path, "the output allows non-integer numbers; the input wants an integer", v)
                        if v is not _NONE
                        else _unproven(path, "number output into integer input")
                    )
                    continue
                v = self.pick(a0, b0, self.candidates(restricted))
                reason = f"the output allows type {t!r}, the input accepts only {sorted(tb)}"
                results.append(_refuted(path, reason, v) if v is not _NONE else _unproven(path, reason))
                continue
            if t in ("integer", "number"):
                why = _numeric_gap(a, b, t)
                results.append(self.gap(a0, b0, path, why, b) if why else _PROVEN)
            elif t == "string":
                why = _string_gap(a, b)
                results.append(self.gap(a0, b0, path, why, b) if why else _PROVEN)
            elif t == "array":
                results.append(self._array(a0, b0, a, b, path, ach, bch, depth))
            elif t == "object":
                results.append(self._object(a0, b0, a, b, path, ach, bch, depth))
        return _combine(results)

    def _array(
        self, a0: Any, b0: Any, a: dict[str, Any], b: dict[str, Any], path: str,
        ach: tuple[str, ...], bch: tuple[str, ...], depth: int,
    ) -> _R:
        restricted = {**a, "type": "array"}
        lo_a, hi_a = a.get("minItems", 0), a.get("maxItems")
        lo_b, hi_b = b.get("minItems", 0), b.get("maxItems")
        if lo_a < lo_b:
            return self.gap(a0, b0, path, f"the output allows fewer than the input's minItems {lo_b}", b)
        if hi_b is not None and (hi_a is None or hi_a > hi_b):
            return self.gap(a0, b0, path, f"the output allows more than the input's maxItems {hi_b}", b)
        if b.get("uniqueItems") is True and a.get("uniqueItems") is not True and (hi_a is None or hi_a > 1):
            return self.gap(a0, b0, path, "the input requires uniqueItems; the output allows repeats", b)
        if "items" not in b or hi_a == 0:
            return _PROVEN
        items_a = a.get("items", True)
        r = self.sub(items_a, b["items"], f"{path}[*]", ach, bch, depth + 1)
        if r.verdict is not Verdict.refuted:
            return r
        found, other = self.witness(items_a)
        arrangements = [[r.value] * max(1, lo_a)]
        if found:
            arrangements.append([r.value] + [other] * max(0, lo_a - 1))
        v = self.pick(restricted, b0, arrangements)
        if v is _NONE:
            return _unproven(r.path, f"{r.reason} (no array around it satisfies the output schema)")
        return _refuted(r.path, r.reason, v)

    def _object(
        self, a0: Any, b0: Any, a: dict[str, Any], b: dict[str, Any], path: str,
        ach: tuple[str, ...], bch: tuple[str, ...], depth: int,
    ) -> _R:
        restricted = {**a, "type": "object"}
        req_a = set(a.get("required", []))
        results: list[_R] = []
        base = self.object_witness(restricted)
        for name in b.get("required", []):
            if name in req_a:
                continue
            reason = f"the input requires {name!r}; the output may omit it"
            at = json_path(path, [name])
            v = self.pick(restricted, b0, [base] if base is not None else [])
            results.append(_refuted(at, reason, v) if v is not _NONE else _unproven(at, reason))
        props_a = a.get("properties", {})
        props_b = b.get("properties", {})
        for name in sorted(set(props_a) | set(props_b)):
            pa = _prop_schema(a, name)
            if _is_false(pa):
                continue
            at = json_path(path, [name])
            r = self.sub(pa, _prop_schema(b, name), at, ach, bch, depth + 1)
            results.append(self._embed(r, restricted, b0, base, name))
        extra_a = a.get("additionalProperties", True)
        if not _is_false(extra_a):
            key = _fresh_key(set(props_a) | set(props_b))
            at = json_path(path, [key])
            r = self.sub(extra_a, b.get("additionalProperties", True), at, ach, bch, depth + 1)
            if r.verdict is not Verdict.proven:
                r = _R(r.verdict, r.path, f"an additional property: {r.reason}", r.value)
            results.append(self._embed(r, restricted, b0, base, key))
        return _combine(results)

    def _embed(self, r: _R, a: dict[str, Any], b0: Any, base: dict[str, Any] | None, key: str) -> _R:
        if r.verdict is not Verdict.refuted:
            return r
        v = _NONE if base is None else self.pick(a, b0, [{**base, key: r.value}])
        if v is _NONE:
            return _unproven(r.path, f"{r.reason} (no object around it satisfies the output schema)")
        return _refuted(r.path, r.reason, v)


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


def _string_gap(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    lo_a, hi_a = a.get("minLength", 0), a.get("maxLength")
    lo_b, hi_b = b.get("minLength", 0), b.get("maxLength")
    if lo_a < lo_b:
        return f"the output allows strings shorter than the input's minLength {lo_b}"
    if hi_b is not None and (hi_a is None or hi_a > hi_b):
        return f"the output allows strings longer than the input's maxLength {hi_b}"
    if "pattern" in b and a.get("pattern") != b["pattern"]:
        return f"the input requires pattern {b['pattern']!r}; regular-expression inclusion is not analysed"
    if "format" in b and a.get("format") != b["format"]:
        return f"the input requires format {b['format']!r}, which the output does not declare identically"
    return None


# --- public entry points ------------------------------------------------------------


def ensure_schema(schema: Any, *, where: str) -> None:
    """Raise ``InvalidSpecError`` naming ``where`` unless ``schema`` is a valid JSON Schema."""
    if schema is True or schema is False:
        return
    problems = schema_violations(
        schema,
        contract="pipeline",
        phase="pre",
        kind=ViolationKind.invalid_output_schema,
        path=where,
    )
    if problems:
        raise InvalidSpecError(problems)


def check_schema_compat(output_schema: Any, input_schema: Any) -> CompatResult:
    """Does every value valid against ``output_schema`` validate against ``input_schema``?

    Raises ``InvalidSpecError`` when either is not a valid JSON Schema.
    """
    ensure_schema(output_schema, where="$.output_schema")
    ensure_schema(input_schema, where="$.input_schema")
    for name, schema in (("output", output_schema), ("input", input_schema)):
        if isinstance(schema, dict) and "$schema" in schema and schema["$schema"] not in _SUPPORTED_DIALECTS:
            return CompatResult(
                verdict=Verdict.unproven,
                reason=f"the {name} schema's dialect {schema['$schema']!r} is not modelled (use Draft 2020-12)",
            )
    checker = _Checker(output_schema, input_schema)
    try:
        r = checker.sub(output_schema, input_schema, "$", (), (), 0)
    except RecursionError:
        return CompatResult(verdict=Verdict.unproven, reason="schemas nest too deeply to analyse")
    if r.verdict is Verdict.refuted:
        # The root-level check is the one that counts: same $ref resolution as at run time.
        if checker.a.valid(output_schema, r.value, strict=True) is True and (
            checker.b.valid(input_schema, r.value, strict=False) is False
        ):
            return CompatResult(
                verdict=Verdict.refuted, reason=r.reason, path=r.path, counterexample=Counterexample(value=r.value)
            )
        return CompatResult(
            verdict=Verdict.unproven,
            path=r.path,
            reason=clip(f"{r.reason} (a candidate counterexample {describe(r.value)} did not check out)"),
        )
    return CompatResult(verdict=r.verdict, reason=r.reason, path=r.path)


def render_counterexample(result: CompatResult) -> str:
    if result.counterexample is None:
        return ""
    return clip(json.dumps(result.counterexample.value, sort_keys=True, default=repr), 200)
