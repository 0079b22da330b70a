"""JSON paths for violations, in one spelling: ``$.a.b[0].c``."""

from __future__ import annotations

from collections.abc import Iterable


def json_path(parts: Iterable[int | str], root: str = "$") -> str:
    path = root
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
