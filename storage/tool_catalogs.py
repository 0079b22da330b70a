"""Tool catalogs in the payload store, for ``llm.call``: store a run's schemas once, read them back checked.

A catalog (``contracts/llm/tool_catalog.py``) is written by the run's
resolving call (a session's: by its first call carrying its schemas), in the same store call as that call's
conversation segment
(``ConversationStore.extend_with_catalog``). Each later call reads it: from
this worker's cache (keyed by owner and digest, so a catalog verified for
one run is never served to another) or, on a worker that never saw it, from
the store, verified (digest, owner, count, every schema) on the way in. A
missing, altered or foreign catalog fails the call typed, never retried.
"""

from __future__ import annotations

from collections import OrderedDict

from ..contracts.errors import PayloadIntegrityError
from ..contracts.llm.tool_catalog import ToolCatalogRef, decode_catalog
from ..contracts.llm.tools import ToolSchema
from .payload_store import PayloadStore, unreadable


class ToolCatalogs:
    def __init__(self, store: PayloadStore, cache_entries: int = 512) -> None:
        self._store = store
        self._cache: OrderedDict[tuple[str, str], list[ToolSchema]] = OrderedDict()
        self._cache_entries = cache_entries

    async def load(self, ref: ToolCatalogRef, owner: str) -> list[ToolSchema]:
        """The schemas ``ref`` names, bound to ``owner``. The same list object on every call of a cached catalog
        (nobody changes it): what the provider derives from the tools stays cheap to recognise."""
        key = (owner, ref.sha256)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        try:
            tools = decode_catalog(ref, await self._store.get(ref.claim), owner)
        except (PayloadIntegrityError, ValueError) as exc:
            raise unreadable("tool catalog", exc) from None
        self.remember(ref, owner, tools)
        return tools

    def remember(self, ref: ToolCatalogRef, owner: str, tools: list[ToolSchema]) -> None:
        key = (owner, ref.sha256)
        self._cache[key] = tools
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_entries:
            self._cache.popitem(last=False)


__all__ = ["ToolCatalogs"]
