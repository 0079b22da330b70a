"""The live parts of the inbox and a run's page, as server-sent events: what changed, never a reload.

Each open page holds one event stream. The console asks Temporal again every
``POLL_SECONDS`` (visibility for the inbox, the run's queries for its page) and
sends an event only when what the page shows changed: the order of the waiting
calls (the HTML of a card only the first time this stream names it), and for a
run its facts and timeline as HTML fragments rendered by the same templates,
so they are escaped the same way. The page's script inserts new cards and
leaves every card already shown alone, so a half-typed note stays put.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from starlette.requests import Request
from temporalio.service import RPCError

from .reads import Waiting

POLL_SECONDS = 1.0


@dataclass
class Snapshot:
    """What a page shows live at one moment."""

    waiting: list[Waiting]
    keys: list[str]
    fragments: dict[str, str] = field(default_factory=dict)
    """Run pages: ``facts`` and ``live`` HTML."""
    done: bool = False
    """The run ended: this is the last event."""


@dataclass
class _Sent:
    cards: set[str] = field(default_factory=set)
    order: list[str] | None = None
    fragments: dict[str, str] = field(default_factory=dict)


async def events(
    request: Request,
    event: str,
    look: Callable[[], Awaitable[Snapshot]],
    card: Callable[[Waiting], str],
    poll: float = POLL_SECONDS,
) -> AsyncIterator[dict[str, str]]:
    sent = _Sent()
    while not await request.is_disconnected():
        try:
            now = await look()
        except (RPCError, asyncio.TimeoutError):  # Temporal busy for a moment: ask again next time
            await asyncio.sleep(poll)
            continue
        changed = {k: v for k, v in now.fragments.items() if sent.fragments.get(k) != v}
        if now.keys != sent.order or changed:
            message: dict[str, object] = {
                "order": now.keys,
                "cards": {k: card(w) for k, w in zip(now.keys, now.waiting, strict=True) if k not in sent.cards},
                **changed,
            }
            sent.cards.update(now.keys)
            sent.order = now.keys
            sent.fragments.update(changed)
            yield {"event": event, "data": json.dumps(message)}
        if now.done:
            break
        await asyncio.sleep(poll)
    yield {"event": "end", "data": "{}"}


__all__ = ["POLL_SECONDS", "Snapshot", "events"]
