"""Prompt caching the way the providers document it, for the scripted model.

Anthropic: a ``cache_control`` mark caches the prefix up to and including its
block, in the API's order (tools, then system, then messages). A later request
whose prefix matches a cached one, at any block boundary, reports that prefix
as ``cache_read_input_tokens``; the rest up to its last mark is written
(``cache_creation_input_tokens``). OpenAI caches automatically: every message
boundary of a request is cached and reported as ``prompt_tokens_details.cached_tokens``
on a later request that repeats it. No minimum length and no expiry: a test
double, deterministic on purpose.
"""

from __future__ import annotations

import json
import threading
from typing import Any


def _blocks_anthropic(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """Every cacheable block in prefix order, with whether it carries a ``cache_control`` mark."""
    out: list[tuple[Any, bool]] = []

    def add(block: Any) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        clean = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
        out.append((clean, marked))

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    for block in system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else []):
        add(block)
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            add({"role": message.get("role"), "block": block})
    return out


_ENCODER = json.JSONEncoder(sort_keys=True)
"""``json.dumps(x, sort_keys=True)`` without building an encoder per call (most of its cost per message)."""


_SCAN = 8
"""Items after one prefix compared one by one; past this many (the runs of a benchmark all
branch off one system prompt) they are looked up by a hashable copy instead."""


class _Prefix:
    """One prefix: what it counts as (its length as sorted JSON) and whether it is cached."""

    __slots__ = ("chars", "cached", "next", "index")

    def __init__(self, chars: int) -> None:
        self.chars = chars
        self.cached = False
        self.next: list[tuple[Any, _Prefix]] = []
        """Each item seen after this prefix, with the longer prefix it makes."""
        self.index: dict[Any, _Prefix] | None = None

    @property
    def tokens(self) -> int:
        return self.chars // 4

    def after(self, item: Any) -> _Prefix | None:
        if self.index is not None:
            return self.index.get(_hashable(item))
        return next((p for seen, p in self.next if seen == item), None)

    def add(self, item: Any, longer: _Prefix) -> None:
        if self.index is not None:
            self.index[_hashable(item)] = longer
            return
        self.next.append((item, longer))
        if len(self.next) > _SCAN:
            self.index = {_hashable(seen): p for seen, p in self.next}


def _hashable(item: Any) -> Any:
    """Equal for equal JSON values, whatever the key order."""
    if isinstance(item, dict):
        return frozenset((k, _hashable(v)) for k, v in item.items())
    if isinstance(item, list):
        return tuple(_hashable(v) for v in item)
    return item


class PromptCache:
    """Every prefix a request has had, as a tree of items.

    A request walks down it comparing items as values (a message equal to one
    seen before is the same message; dict equality runs in C) and encodes only
    the items past the longest prefix it shares with an earlier request. A
    conversation repeats itself whole on every request, so encoding and hashing
    every message of every request was the scripted model's largest cost at a
    few hundred messages.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._root = _Prefix(2)  # ``[]``

    def anthropic(self, body: dict[str, Any]) -> tuple[int, int]:
        """``(cache_read, cache_write)`` tokens for a Messages request; records its marked prefixes."""
        blocks = _blocks_anthropic(body)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        if not marks:
            return 0, 0
        with self._lock:
            path, hit = self._walk([b for b, _ in blocks])
            for i in marks:
                path[i].cached = True
        read = path[hit].tokens if hit >= 0 else 0
        written = path[marks[-1]].tokens - read if marks[-1] > hit else 0
        return read, max(0, written)

    def openai(self, body: dict[str, Any]) -> int:
        """Cached prompt tokens for a Chat Completions request; records its message prefixes."""
        messages = [m for m in body.get("messages") or []]
        if not messages:
            return 0
        with self._lock:
            path, hit = self._walk(messages)
            for prefix in path:
                prefix.cached = True
        return path[hit].tokens if hit >= 0 else 0

    def _walk(self, items: list[Any]) -> tuple[list[_Prefix], int]:
        """The prefix ``items[: i + 1]`` for every ``i`` (added where new), and the last cached one's index.

        A prefix counts ``len(json.dumps(items[: i + 1], sort_keys=True))``
        characters: ``[``, the items joined by ``, ``, ``]``.
        """
        path: list[_Prefix] = []
        hit = -1
        prefix = self._root
        for i, item in enumerate(items):
            longer = prefix.after(item)
            if longer is None:
                longer = _Prefix(prefix.chars + len(_ENCODER.encode(item)) + (2 if i else 0))
                prefix.add(item, longer)
            elif longer.cached:
                hit = i
            path.append(longer)
            prefix = longer
        return path, hit
