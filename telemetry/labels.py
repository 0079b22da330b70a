"""Bounded label values: what a caller or a model names never mints an unbounded number of series.

A label value is kept when it is known (the operator configured it: a priced
model, a registered tool), or when it proved real (the provider served the
model, a tool source offered the tool) while fewer than ``limit`` such values
have been admitted; anything else (a model a spec made up and the provider
rejected, a tool name the model hallucinated, a value that is not a plain
identifier) is recorded as ``other``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

OTHER = "other"
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")


class BoundedLabel:
    def __init__(self, limit: int, known: Iterable[str] = ()) -> None:
        self._limit = limit
        self._known = set(known)
        self._admitted: set[str] = set()
        self._lock = threading.Lock()

    def add_known(self, values: Iterable[str]) -> None:
        with self._lock:
            self._known.update(v for v in values if _PLAIN.fullmatch(v))

    def known(self, value: str) -> str:
        """``value`` if it is configured or already admitted, else ``other`` (for rejected requests)."""
        return value if value in self._known or value in self._admitted else OTHER

    def admit(self, value: str) -> str:
        """``value`` if known, or admitted now as proven real while under the limit; else ``other``."""
        if value in self._known or value in self._admitted:
            return value
        if not _PLAIN.fullmatch(value):
            return OTHER
        with self._lock:
            if len(self._admitted) < self._limit:
                self._admitted.add(value)
                return value
        return OTHER


MODELS = BoundedLabel(limit=64)
"""``model`` on every LLM metric. Known: the price and capability tables; admitted: models a provider served."""

TOOLS = BoundedLabel(limit=256)
"""``tool`` on tool metrics. Known: registered Python tools; admitted: tools an MCP server offers."""
