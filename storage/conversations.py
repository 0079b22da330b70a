"""Conversations in the payload store, for ``llm.call``: load and verify a chain, store a segment.

The chain is verified segment by segment (digest, version, length) on its way
in; a verified prefix is cached by its head digest, so a session's next call
reads one segment, not the whole conversation, while any worker without the
cache can still rebuild it from the store.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from ..contracts.errors import PayloadIntegrityError, PayloadMissingError
from ..contracts.llm.conversation import ConversationRef, decode_node, encode_node
from ..contracts.llm.messages import Message
from ..failures import to_application_error
from .payload_store import PayloadStore


class ConversationStore:
    def __init__(self, store: PayloadStore, cache_entries: int = 512) -> None:
        self._store = store
        self._cache: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._cache_entries = cache_entries

    async def load(self, ref: ConversationRef | None) -> list[Message]:
        """The whole conversation ``ref`` names; a missing or altered segment fails typed, never retried."""
        segments: list[list[Message]] = []
        base: tuple[Message, ...] = ()
        current = ref
        while current is not None:
            cached = self._cache.get(current.sha256)
            if cached is not None:
                self._cache.move_to_end(current.sha256)
                base = cached
                break
            try:
                data = await self._store.get(current.claim)
                current, messages = decode_node(current, data)
            except (PayloadIntegrityError, ValueError) as exc:
                # Typed as what went wrong (a missing segment is PayloadMissingError), and never retried.
                message = f"the run's stored conversation cannot be read: {exc}"
                kind = PayloadMissingError if isinstance(exc, PayloadMissingError) else PayloadIntegrityError
                raise to_application_error(kind(message)) from None
            segments.append(messages)
        full = list(base)
        for messages in reversed(segments):
            full.extend(messages)
        if ref is not None:
            self._remember(ref.sha256, full)
        return full

    async def extend(self, ref: ConversationRef | None, full: list[Message], added: list[Message]) -> ConversationRef:
        """Store ``added`` after ``ref``; ``full`` is the whole conversation it makes (for the cache)."""
        data = encode_node(ref, added)
        claim = await self._store.put(data)
        head = ConversationRef(
            sha256=hashlib.sha256(data).hexdigest(), length=(ref.length if ref else 0) + len(added), claim=claim
        )
        self._remember(head.sha256, full)
        return head

    def _remember(self, digest: str, messages: list[Message]) -> None:
        self._cache[digest] = tuple(messages)
        self._cache.move_to_end(digest)
        while len(self._cache) > self._cache_entries:
            self._cache.popitem(last=False)


__all__ = ["ConversationStore"]
