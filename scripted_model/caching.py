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

import hashlib
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


class PromptCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._prefixes: set[str] = set()

    def anthropic(self, body: dict[str, Any]) -> tuple[int, int]:
        """``(cache_read, cache_write)`` tokens for a Messages request; records its marked prefixes."""
        blocks = _blocks_anthropic(body)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        if not marks:
            return 0, 0
        digests, tokens = _prefixes([b for b, _ in blocks])
        with self._lock:
            hit = max((i for i in range(len(blocks)) if digests[i] in self._prefixes), default=-1)
            self._prefixes.update(digests[i] for i in marks)
        read = tokens[hit] if hit >= 0 else 0
        written = tokens[marks[-1]] - read if marks[-1] > hit else 0
        return read, max(0, written)

    def openai(self, body: dict[str, Any]) -> int:
        """Cached prompt tokens for a Chat Completions request; records its message prefixes."""
        messages = [m for m in body.get("messages") or []]
        if not messages:
            return 0
        digests, tokens = _prefixes(messages)
        with self._lock:
            hit = max((i for i in range(len(messages)) if digests[i] in self._prefixes), default=-1)
            self._prefixes.update(digests)
        return tokens[hit] if hit >= 0 else 0


def _prefixes(items: list[Any]) -> tuple[list[str], list[int]]:
    """Per prefix ``items[: i + 1]``: a running hash that identifies it, and its tokens.

    Tokens are the scripted model's rough 4 characters per token of the prefix as
    sorted JSON, ``len(json.dumps(items[: i + 1], sort_keys=True)) // 4``, added
    up from each item's encoding (``[``, items joined by ``, ``, ``]``) instead
    of encoding every prefix again: a request repeats the whole conversation,
    so this runs over every message of every request.
    """
    running = hashlib.sha256()
    digests: list[str] = []
    tokens: list[int] = []
    chars = 2
    for i, item in enumerate(items):
        encoded = _ENCODER.encode(item)
        running.update(encoded.encode())
        digests.append(running.copy().hexdigest())
        chars += len(encoded) + (2 if i else 0)
        tokens.append(chars // 4)
    return digests, tokens
