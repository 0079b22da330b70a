"""A session's progress stream as server-sent events, for the live part of the session page.

The console follows the session through this process's one feed of it
(``client/session_stream.py``: one query poller however many pages are open,
no Update, nothing left behind when a page closes) and hands each folded item
on as one JSON ``data`` line with the item's stream position as its ``id``, so
a browser that reconnects (it sends ``Last-Event-ID``) gets exactly what it
missed. The page adds text with ``textContent``; a page that opens mid-turn
starts at that turn's start. The subscription ends with the session, or when
the browser leaves.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing

from temporalio.client import Client

from ..client.session_stream import After, follow
from ..client.transcript import StreamItem


async def progress_events(client: Client, session_id: str, after: After = "turn") -> AsyncIterator[dict[str, str]]:
    async with aclosing(follow(client, session_id, after=after)) as items:
        async for item in items:
            yield {"id": str(item.position), "data": json.dumps(_shown(item))}
    yield {"event": "end", "data": "{}"}


def _shown(item: StreamItem) -> dict[str, object]:
    """The fields the page shows; a piece of the answer keeps the kind the page knows (``token``)."""
    shown = item.wire()
    if item.kind == "text" or item.corrected:
        shown["kind"], shown["detail"] = "token", item.text
    return shown


__all__ = ["progress_events"]
