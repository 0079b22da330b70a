"""The package's own source files, for the tests that read them (rooms, error seam).

The repository root is the package, and it also holds `.venv` and the pinned third-party MCP venvs:
`ROOT.rglob("*.py")` walked their tens of thousands of files before filtering them out, seconds of the
fast lane. The walk here prunes those folders on the way down, once per test process.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folders at any depth that are not the package; any folder or file whose name starts with "." is not either.
NOT_PACKAGE = frozenset({"tests", "docs", "deploy", "bench", "__pycache__"})


@functools.cache
def package_files() -> tuple[Path, ...]:
    """Every ``.py`` file of the package, sorted."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if d not in NOT_PACKAGE and not d.startswith(".")]
        found += [Path(folder, f) for f in files if f.endswith(".py") and not f.startswith(".")]
    return tuple(sorted(found))
