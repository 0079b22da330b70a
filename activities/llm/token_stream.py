"""A streamed answer's text, published on the calling workflow's progress stream while the call runs.

The ``llm.call`` activity publishes through ``WorkflowStreamClient.from_within_activity``
(a signal per batch). Text is coalesced into one ``token`` event about every
100 ms (or every 2,000 characters), so history grows per batch, never per
token; each batch also heartbeats. Publishing is advisory and never fails the
call: a retried attempt streams its answer again, and every event says where
its text starts in the answer (``offset``) and which model wrote it, so a
reader folds the replayed prefix away (``client/session_stream.py``); the
completed message the activity returns is what counts.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from datetime import datetime, timezone
from typing import Any

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from ...contracts.llm.request import TokenStream
from ...contracts.names import PROGRESS_TOPIC
from ...contracts.session import ProgressEvent
from ..attempts import keep_alive

log = logging.getLogger(__name__)

BATCH_SECONDS = 0.1
BATCH_CHARS = 2000
_FLUSH_TIMEOUT_SECONDS = 5.0


class TokenPublisher:
    def __init__(self, target: TokenStream, model: str = "") -> None:
        self._target = target
        self._model = model or None
        self._sent = 0
        """Characters of this attempt's answer already published: the next event's ``offset``."""
        self._buffer: list[str] = []
        self._size = 0
        self._attempt = 1
        self._client: WorkflowStreamClient | None = None
        self._topic: Any = None
        self._ticker: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TokenPublisher:
        self._attempt = activity.info().attempt
        # The client's own background flusher is not used: on Python 3.11 its asyncio.wait_for can
        # swallow the cancel that stops it, and the activity would wait for it. The ticker here flushes.
        try:
            self._client = WorkflowStreamClient.from_within_activity()
        except Exception as exc:  # noqa: BLE001 - tokens are advisory: the call goes on without them
            log.warning("token stream unavailable, answering without it: %s", exc)
        else:
            self._topic = self._client.topic(PROGRESS_TOPIC)
        self._ticker = asyncio.create_task(self._tick())
        return self

    def add(self, text: str) -> None:
        self._buffer.append(text)
        self._size += len(text)
        if self._size >= BATCH_CHARS:
            self._publish()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(BATCH_SECONDS)
            # A liveness heartbeat on every tick, text or not: a worker loading its provider's SDK or waiting for
            # the model's first token is alive, and only a dead one (SIGKILL) misses the heartbeat timeout.
            keep_alive()
            self._publish()
            await self._flush()

    async def _flush(self) -> None:
        if self._client is None:
            return
        try:
            await self._client.flush()
        except Exception as exc:  # noqa: BLE001 - advisory: a lost batch never fails the call
            log.warning("token stream: a batch was not delivered: %s", exc)

    def _publish(self) -> None:
        if not self._buffer:
            return
        text, self._buffer, self._size = "".join(self._buffer), [], 0
        offset, self._sent = self._sent, self._sent + len(text)
        keep_alive()  # never erases the 429s earlier attempts counted
        if self._topic is None:
            return
        event = ProgressEvent(
            kind="token",
            turn=self._target.turn,
            step=self._target.step,
            detail=text,
            at=datetime.now(timezone.utc),
            attempt=self._attempt,
            offset=offset,
            model=self._model,
        )
        self._topic.publish(event)  # buffered in the client until the next flush: one signal per batch

    async def __aexit__(self, *exc: object) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with suppress(asyncio.CancelledError):
                await self._ticker
        self._publish()
        # Flushed before the activity returns, so the text is on the stream before the step that used it
        # (a batch the cancelled ticker left pending is sent again under its sequence number: once).
        try:
            await asyncio.wait_for(self._flush(), _FLUSH_TIMEOUT_SECONDS)
        except asyncio.TimeoutError:
            log.warning("token stream: the last batch was not delivered within %s s", _FLUSH_TIMEOUT_SECONDS)


__all__ = ["BATCH_CHARS", "BATCH_SECONDS", "TokenPublisher"]
