"""pyproject.toml declares ranges; constraints.txt is the set CI tests. They must never disagree."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.fast
ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SHIPPED = [Requirement(r) for r in PROJECT["dependencies"]] + [
    Requirement(r) for extra in ("s3", "otlp") for r in PROJECT["optional-dependencies"][extra]
]


def _tested() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_every_shipped_dependency_has_a_tested_version_inside_its_declared_range():
    tested = _tested()
    outside = {
        str(r): tested.get(canonicalize_name(r.name))
        for r in SHIPPED
        if not r.specifier.contains(tested.get(canonicalize_name(r.name), "0"), prereleases=True)
    }
    assert outside == {}, "constraints.txt pins a version the declared range excludes (or none): run make constraints"


def test_shipped_dependencies_are_ranges_except_the_snapshot_format_owner():
    exact = sorted(r.name for r in SHIPPED if any(s.operator == "==" for s in r.specifier))
    assert exact == ["pydantic-monty"]
    unbounded = sorted(
        r.name for r in SHIPPED if not any(s.operator == "<" for s in r.specifier) and r.name not in exact
    )
    assert unbounded == [], "an upper bound (the next major) keeps a breaking release out of a user's install"
