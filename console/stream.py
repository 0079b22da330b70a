"""A session's progress stream as server-sent events, for the live part of the session page.

The console subscribes to the session workflow's stream (``PROGRESS_TOPIC``)
as ``agentsteps chat`` does, and hands each event on as one JSON ``data``
line; the page adds text with ``textContent``. Only the fields a page shows
are sent. The subscription ends with the session, or when the browser leaves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError

from ..contracts.names import PROGRESS_TOPIC
from ..contracts.session import ProgressEvent

BACKLOG = 400
"""Events re-read when a page opens: a turn already running shows what it streamed so far."""


async def progress_events(client: Client, session_id: str) -> AsyncIterator[dict[str, str]]:
    stream = WorkflowStreamClient.create(client, session_id)
    try:
        offset = max(0, await stream.get_offset() - BACKLOG)
        async for item in stream.subscribe([PROGRESS_TOPIC], from_offset=offset, result_type=ProgressEvent):
            event: ProgressEvent = item.data
            yield {"data": json.dumps(_shown(event))}
    except (RPCError, asyncio.TimeoutError):
        pass
    yield {"event": "end", "data": "{}"}


def _shown(event: ProgressEvent) -> dict[str, object]:
    return {
        "kind": event.kind,
        "turn": event.turn,
        "tool": event.tool or "",
        "detail": event.detail,
        "step": event.step,
    }


__all__ = ["progress_events"]
