"""Numeric and string bounds: when the output's limits imply the input's, and sample numbers near them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ...json_schema import describe


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
        exact = isinstance(mb, int) and ((isinstance(ma, int) and ma % mb == 0) or (t == "integer" and mb == 1))
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
