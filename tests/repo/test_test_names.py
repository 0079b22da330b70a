"""Every test module has a name of its own across the folders: pytest imports them by basename
(rootdir mode, no packages), so two branches adding one name each broke collection on the merge."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


@pytest.mark.fast
def test_no_two_test_modules_share_a_basename():
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if ".venv" not in path.parts:
            places[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: found for name, found in places.items() if len(found) > 1}
    assert not shared, f"rename one of each: {shared}"
