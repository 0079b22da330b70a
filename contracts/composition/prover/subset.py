"""The subset relation between an output schema and an input schema, keyword by keyword."""

from __future__ import annotations

from typing import Any

from ...json_schema import describe, json_path
from .bounds import _int_lower, _int_upper, _number_points, _numeric_gap, _string_gap
from .results import _PROVEN, _R, Verdict, _combine, _refuted, _unproven
from .search import _NONE, _fresh_key, _prop_schema, _Search
from .sides import _deref
from .vocabulary import (
    _ALL_TYPES,
    _COMBINATORS,
    _MAX_DEPTH,
    _MAX_ENUMERATED,
    _NARROWING_ONLY,
    _SUPPORTED,
    _accepts_type,
    _is_false,
    _is_true,
    _normalize,
    _types,
    _validation_keys,
)


class _Checker(_Search):
    """The subset relation: does every output value validate against the input?"""

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
                return self.gap(a0, b0, path, "oneOf on the input side: exclusivity of its branches is not analysed")
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
        return self.gap(
            a0, b0, path, "the input accepts a fixed set of values (enum/const) the output is not limited to"
        )

    def _plain(
        self,
        a0: Any,
        b0: Any,
        a: dict[str, Any],
        b: dict[str, Any],
        path: str,
        ach: tuple[str, ...],
        bch: tuple[str, ...],
        depth: int,
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
        self,
        a0: Any,
        b0: Any,
        a: dict[str, Any],
        b: dict[str, Any],
        path: str,
        ach: tuple[str, ...],
        bch: tuple[str, ...],
        depth: int,
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
        self,
        a0: Any,
        b0: Any,
        a: dict[str, Any],
        b: dict[str, Any],
        path: str,
        ach: tuple[str, ...],
        bch: tuple[str, ...],
        depth: int,
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
