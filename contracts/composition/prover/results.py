"""Verdicts: the public result types and the internal result every step of a proof returns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from ...json_schema import clip


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
