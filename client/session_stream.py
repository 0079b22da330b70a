"""Follow a session's progress stream: one poller per process and session, shared by all its readers.

A reader never costs the session an Update. Each process (a backend, the
console, ``agentsteps chat``) keeps one ``SessionFeed`` per session it follows:
one task reading the workflow's stream by query (queries take no Update slot
and write nothing to history), folding it into one transcript
(``client/transcript.py``) and handing every reader the same items. A
thousand readers of one session in one process cost the session what one
does; the feed stops when its last reader leaves, so a closed page leaves
nothing behind.

Every item has the stream position of its event (``StreamItem.position``),
stable across continue-as-new; ``follow(..., after=p)`` gives exactly the
items after ``p``, which is how a reader resumes (``Last-Event-ID`` over HTTP,
console/session_events.py). Retention: the session keeps the turn that ended
last whole, and earlier events up to 500 in all (docs/sessions.md#resume-a-stream);
a reader asking for less gets a ``gap`` item first.

    async for item in follow(client, session_id, after=-1):
        ...
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.workflow_streams._types import PollInput, PollResult, _decode_payload
from temporalio.service import RPCError, RPCStatusCode

from ..contracts import Step
from ..contracts.names import PROGRESS_TOPIC, STEPS_QUERY
from ..contracts.session import ProgressEvent
from .transcript import StreamItem, Transcript

_log = logging.getLogger(__name__)

POLL_QUERY = "__temporal_workflow_stream_poll"
"""The stream library's read-only poll query (its Update of the same name is what readers no longer use)."""
OFFSET_QUERY = "__temporal_workflow_stream_offset"
"""The stream library's query for the log's end."""
ACTIVE_POLL_SECONDS = 0.04
"""While events keep coming: how often the feed asks for more (doubling, up to the idle pace, while none do)."""
BATCH_POLL_SECONDS = 0.08
"""The slowest pace while text is coming: a streamed answer arrives in batches about 100 ms apart."""
IDLE_POLL_SECONDS = 0.25
"""Between turns: a new turn's first events reach readers within this."""
CLOSED_CHECK_SECONDS = 2.0
"""Between turns, how often the feed asks whether the session's workflow has ended."""
ITEMS_KEPT = 4000
"""Folded items a feed keeps in memory for readers that resume; older ones answer with a ``gap``."""
_QUERY_TIMEOUT_SECONDS = 10.0

After = int | Literal["turn"]
"""Where a reader starts: after this position (-1: everything retained), or ``"turn"``: the latest turn's start."""


@dataclass
class SessionFeed:
    """One session's stream in this process: its poller, its fold, the items its readers share."""

    client: Client
    session_id: str
    items: list[StreamItem] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    base: int = 0
    """Readers resuming before this position get a ``gap``: the session or this feed no longer holds it."""
    next_offset: int = 0
    ended: bool = False
    """The session's workflow has ended and its stream is read to the end."""
    readers: int = 0
    last_turn_start: int | None = None
    transcript: Transcript = field(default_factory=Transcript)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _started: bool = False

    # ------------------------------------------------------------ readers

    async def follow(self, after: After = -1) -> AsyncGenerator[StreamItem, None]:
        """The items after ``after``, then each new one as it comes, until the session ends."""
        while not self._started and not self.ended:
            await self._wait()
        cursor = self._start(after)
        if cursor >= 0 and cursor < self.base - 1:
            yield StreamItem(self.base - 1, "gap", 0, text=f"positions {cursor + 1} to {self.base - 1} are gone")
            cursor = self.base - 1
        while True:
            index = bisect.bisect_right(self.positions, cursor)
            if index < len(self.items):
                for item in self.items[index:]:
                    cursor = item.position
                    yield item
                continue
            if self.ended:
                return
            await self._wait()

    def _start(self, after: After) -> int:
        if after != "turn":
            return after
        return self.last_turn_start - 1 if self.last_turn_start is not None else self.next_offset - 1

    async def _wait(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # ------------------------------------------------------------ the one poller

    async def run(self) -> None:
        try:
            await self._poll()
        except asyncio.CancelledError:
            raise
        except Exception:  # a reader must never wait on a poller that died: it ends, and says why in the log
            _log.exception("session stream %s: the feed stopped", self.session_id)
            self.ended = True
            self._notify()

    async def _poll(self) -> None:
        handle = self.client.get_workflow_handle(self.session_id)
        quiet_since = time.monotonic()
        checked_closed = 0.0
        first = True
        wait = ACTIVE_POLL_SECONDS
        while True:
            try:
                result: PollResult = await handle.query(
                    POLL_QUERY,
                    PollInput(topics=[PROGRESS_TOPIC], from_offset=self.next_offset),
                    result_type=PollResult,
                    rpc_timeout=timedelta(seconds=_QUERY_TIMEOUT_SECONDS),
                )
            except RPCError as exc:
                if exc.status is RPCStatusCode.NOT_FOUND:  # a session whose first turn has not started it yet
                    self._mark_started()
                    await asyncio.sleep(IDLE_POLL_SECONDS)
                    continue
                _log.warning("session stream %s: %s", self.session_id, exc.message)
                await asyncio.sleep(IDLE_POLL_SECONDS)
                continue
            if first and result.items:
                self.base = result.items[0].offset
            first = False
            got = await self._take(result)
            self._mark_started()
            if result.more_ready:
                continue
            now = time.monotonic()
            if got:
                quiet_since, wait = now, ACTIVE_POLL_SECONDS
            else:  # nothing new: back off, so a turn waiting on a tool or a person is asked less often
                wait = min(wait * 2, BATCH_POLL_SECONDS if now - quiet_since < 1.0 else IDLE_POLL_SECONDS)
            running = self.last_turn_start is not None and not self._turn_over()
            if running or now - quiet_since < 1.0:
                await asyncio.sleep(wait)
                continue
            if now - checked_closed >= CLOSED_CHECK_SECONDS:
                checked_closed = now
                if await self._workflow_ended(handle):
                    # One last read: what the session published as it ended.
                    with contextlib.suppress(RPCError):
                        last = await handle.query(
                            POLL_QUERY,
                            PollInput(topics=[PROGRESS_TOPIC], from_offset=self.next_offset),
                            result_type=PollResult,
                        )
                        await self._take(last)
                    self.ended = True
                    self._notify()
                    return
            await asyncio.sleep(IDLE_POLL_SECONDS)

    def _mark_started(self) -> None:
        if not self._started:
            self._started = True
            self._notify()

    def _turn_over(self) -> bool:
        return bool(self.items) and self.items[-1].kind == "turn_ended"

    async def _take(self, result: PollResult) -> bool:
        converter = self.client.data_converter.payload_converter
        added = False
        for wire in result.items:
            if wire.offset < self.next_offset:
                continue
            if wire.offset > self.next_offset and self.items:
                # The session trimmed past what this feed read (it fell far behind): a reader is told.
                self._keep(StreamItem(wire.offset - 1, "gap", self.transcript.turn, text="events were trimmed"))
            try:
                event = converter.from_payloads([_decode_payload(wire.data)], [ProgressEvent])[0]
            except Exception as exc:  # noqa: BLE001 - one unreadable event must not stop every reader
                _log.warning("session stream %s: event %d unreadable: %s", self.session_id, wire.offset, exc)
                self.next_offset = wire.offset + 1
                continue
            answer = await self._answer(event) if self.transcript.needs_answer(event) else None
            item = self.transcript.add(wire.offset, event, answer)
            if event.kind == "turn_started":
                self.last_turn_start = wire.offset
            if item is not None:
                self._keep(item)
                added = True
            self.next_offset = wire.offset + 1
        self.next_offset = max(self.next_offset, result.next_offset)
        if added:
            self._notify()
        return added

    def _keep(self, item: StreamItem) -> None:
        self.items.append(item)
        self.positions.append(item.position)
        if len(self.items) > 2 * ITEMS_KEPT:
            del self.items[:ITEMS_KEPT], self.positions[:ITEMS_KEPT]
            self.base = self.positions[0]

    async def _answer(self, event: ProgressEvent) -> str | None:
        """The completed answer of the event's step, read back from the session (the ``steps`` query)."""
        try:
            steps = await self.client.get_workflow_handle(self.session_id).query(
                STEPS_QUERY, event.step or 0, result_type=list[Step]
            )
        except RPCError:
            return None
        return next((s.content or "" for s in steps if s.index == event.step), None)

    async def _workflow_ended(self, handle: WorkflowHandle[Any, Any]) -> bool:
        try:
            described = await handle.describe()
        except RPCError as exc:
            return exc.status is RPCStatusCode.NOT_FOUND and self.next_offset > 0
        return described.status not in (None, WorkflowExecutionStatus.RUNNING)


_feeds: dict[tuple[int, str], SessionFeed] = {}


async def follow(client: Client, session_id: str, *, after: After = -1) -> AsyncGenerator[StreamItem, None]:
    """A session's folded stream after ``after``, from this process's one feed of it (started for the first
    reader, stopped when the last leaves). Ends when the session's workflow has ended."""
    key = (id(client), session_id)
    feed = _feeds.get(key)
    if feed is None:
        feed = _feeds[key] = SessionFeed(client, session_id)
        feed._task = asyncio.ensure_future(feed.run())  # noqa: SLF001 - the feed's own poller, owned here
    feed.readers += 1
    try:
        async for item in feed.follow(after):
            yield item
    finally:
        feed.readers -= 1
        if feed.readers == 0 and _feeds.get(key) is feed:
            del _feeds[key]
            if feed._task is not None:  # noqa: SLF001
                feed._task.cancel()  # noqa: SLF001


async def latest_position(client: Client, session_id: str) -> int:
    """The position of the session's last event so far (-1: none yet, or no such session yet): follow
    ``after=`` it for what comes next."""
    try:
        end: int = await client.get_workflow_handle(session_id).query(OFFSET_QUERY, result_type=int)
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return -1
        raise
    return end - 1


def feeds_open() -> int:
    """Feeds this process runs (one per session with readers): what a test counts to prove none is left."""
    return len(_feeds)


__all__ = ["After", "SessionFeed", "feeds_open", "follow", "latest_position"]
