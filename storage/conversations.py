"""Conversations in the payload store, for ``llm.call``: load and verify a chain, store a segment.

The chain is verified segment by segment (digest, version, length) on its way
in; a verified prefix is cached by its owner and head digest, so a session's
next call reads one segment, not the whole conversation, while any worker
without the cache can still rebuild it from the store. A cached prefix is a
``KnownPrefix``: beside its messages it keeps what calls derived from them
(``contracts/llm/prefix.py``), so the next call derives it for its new
messages only. The cache is bounded (``cache_entries`` prefixes), and a
worker without it reads, verifies and derives the same.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from temporalio import activity

from ..contracts.errors import PayloadIntegrityError
from ..contracts.llm.conversation import ConversationRef, decode_node, encode_node
from ..contracts.llm.messages import Message
from ..contracts.llm.prefix import KnownPrefix
from ..contracts.llm.tool_catalog import ToolCatalogRef, catalog_ref, encode_catalog
from ..contracts.llm.tools import ToolSchema
from ..contracts.persisted_ids import owned_by_workflow
from ..failures import to_application_error
from .payload_store import PayloadStore, unreadable
from .tool_catalogs import ToolCatalogs


def caller_owner(owner: str) -> str:
    """``owner`` when it names the calling workflow (``<workflow id>/...``), so an activity's input can never
    read or write another workflow's conversation; a typed, non-retried failure otherwise."""
    if owner and activity.in_activity() and not owned_by_workflow(owner, activity.info().workflow_id):
        raise to_application_error(
            PayloadIntegrityError(f"the conversation's owner {owner!r} is not the calling workflow")
        )
    return owner


class ConversationStore:
    def __init__(self, store: PayloadStore, cache_entries: int = 512) -> None:
        self._store = store
        self._cache: OrderedDict[tuple[str, str], KnownPrefix] = OrderedDict()
        self._cache_entries = cache_entries
        self.catalogs = ToolCatalogs(store, cache_entries)
        """The runs' tool catalogs, in the same store (``storage/tool_catalogs.py``)."""

    async def load(self, ref: ConversationRef | None, owner: str = "") -> list[Message]:
        """The whole conversation ``ref`` names, every segment bound to ``owner`` (or written before owners
        existed); a missing, altered or foreign segment fails typed, never retried."""
        return list((await self.known(ref, owner)).messages)

    async def known(self, ref: ConversationRef | None, owner: str = "") -> KnownPrefix:
        """``load``'s conversation as the cached ``KnownPrefix`` (with what calls derived from it), verified alike."""
        if ref is None:
            return KnownPrefix(())
        cached = self._cache.get((owner, ref.sha256))
        if cached is not None:
            self._cache.move_to_end((owner, ref.sha256))
            return cached
        segments: list[list[Message]] = []
        base: tuple[Message, ...] = ()
        current: ConversationRef | None = ref
        while current is not None:
            found = self._cache.get((owner, current.sha256))
            if found is not None:
                self._cache.move_to_end((owner, current.sha256))
                base = found.messages
                break
            try:
                data = await self._store.get(current.claim)
                current, messages = decode_node(current, data, owner)
            except (PayloadIntegrityError, ValueError) as exc:
                raise unreadable("conversation", exc) from None
            segments.append(messages)
        full = list(base)
        for messages in reversed(segments):
            full.extend(messages)
        known = KnownPrefix(full)
        self._remember((owner, ref.sha256), known)
        return known

    async def extend(
        self,
        ref: ConversationRef | None,
        full: Sequence[Message] | KnownPrefix,
        added: list[Message],
        owner: str = "",
    ) -> ConversationRef:
        """Store ``added`` after ``ref``, bound to ``owner``; ``full`` is the whole conversation it makes (for the
        cache: as a ``KnownPrefix``, the next call resumes what this one derives from it)."""
        data = encode_node(ref, added, owner)
        claim = await self._store.put(data)
        return self._stored(ref, full, added, owner, data, claim)

    async def extend_with_catalog(
        self,
        ref: ConversationRef | None,
        full: Sequence[Message] | KnownPrefix,
        added: list[Message],
        owner: str,
        tools: list[ToolSchema],
    ) -> tuple[ConversationRef, ToolCatalogRef]:
        """``extend``, and ``tools`` stored as the run's catalog bound to ``owner``, in the same store call."""
        data, catalog = encode_node(ref, added, owner), encode_catalog(tools, owner)
        claim, catalog_claim = await self._store.put_all([data, catalog])
        stored = catalog_ref(catalog, len(tools), catalog_claim)
        self.catalogs.remember(stored, owner, tools)
        return self._stored(ref, full, added, owner, data, claim), stored

    def _stored(
        self,
        ref: ConversationRef | None,
        full: Sequence[Message] | KnownPrefix,
        added: list[Message],
        owner: str,
        data: bytes,
        claim: dict[str, str],
    ) -> ConversationRef:
        head = ConversationRef(
            sha256=hashlib.sha256(data).hexdigest(), length=(ref.length if ref else 0) + len(added), claim=claim
        )
        self._remember((owner, head.sha256), full if isinstance(full, KnownPrefix) else KnownPrefix(full))
        return head

    def _remember(self, key: tuple[str, str], known: KnownPrefix) -> None:
        """Cached by owner and head: a verified prefix is reused only by the owner it was verified for."""
        self._cache[key] = known
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_entries:
            self._cache.popitem(last=False)


__all__ = ["ConversationStore", "caller_owner"]
