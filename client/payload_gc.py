"""``agentsteps payloads gc``: delete stored payloads that no open run or session can still reach.

Nothing else ever deletes from the payload store. Collection is by
reachability, never by age alone. A payload is kept when:

- a root references it: the history of an open workflow, or of a run that
  continued as new within ``older_than`` (its successor may not be listed
  yet: the listing is eventually consistent), mentions its sha256
  (external-storage references, conversation heads, REPL dumps and program
  snapshots all carry it);
- or a kept payload references it, transitively (a conversation segment names
  its parent; a large program status holds a snapshot ref);
- or it was stored *or re-referenced* after ``now - older_than``, measured
  from the gc's own start: a run writing it now may not have recorded the
  reference yet. Both stores mark a re-used object as referenced on every
  store (the local store touches the file, the S3 store copies the object
  onto itself), so content shared with an old run is as young as its
  newest user.

Against races: the store is listed before histories are read; open runs are
listed again after the sweep list is built; and each object's time is read
again just before it is deleted, so a payload written or re-referenced while
gc runs is never deleted. Dry run unless ``delete`` is set. Do not use an S3
lifecycle rule that expires by age (docs/operations.md says why).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from temporalio.client import Client

from ..contracts.errors import PayloadMissingError
from ..storage.payload_store import PayloadStore
from ..storage.s3_store import StoredObject

_DIGEST = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
OPEN_WORKFLOWS = "ExecutionStatus = 'Running'"
_CONTINUED_SINCE = "ExecutionStatus = 'ContinuedAsNew' AND CloseTime > '{since}'"


@dataclass
class GcReport:
    store: str
    deleted: bool
    garbage: list[StoredObject] = field(default_factory=list)
    referenced: int = 0
    recent: int = 0
    open_workflows: int = 0
    cutoff: datetime | None = None
    """Objects stored or re-referenced after it are kept: ``older_than`` before the gc's own start."""
    failed: list[tuple[StoredObject, str]] = field(default_factory=list)
    """Garbage the store would not delete after ``DELETE_TRIES`` (kept, with the store's reason): the next run
    tries again."""

    @property
    def garbage_bytes(self) -> int:
        return sum(o.size for o in self.garbage)

    def summary(self) -> str:
        verb = "deleted" if self.deleted else "would delete (dry run; --delete to act)"
        line = (
            f"{self.store}: {verb} {len(self.garbage)} payloads, {self.garbage_bytes} bytes; kept "
            f"{self.referenced} referenced by {self.open_workflows} open workflows and {self.recent} younger than "
            "the cutoff"
        )
        if self.failed:
            o, why = self.failed[0]
            line += f"; FAILED to delete {len(self.failed)} (kept; run gc again), first sha256:{o.digest}: {why}"
        return line

    def as_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "deleted": self.deleted,
            "garbage": [o.digest for o in self.garbage],
            "garbage_bytes": self.garbage_bytes,
            "referenced": self.referenced,
            "recent": self.recent,
            "open_workflows": self.open_workflows,
            "cutoff": None if self.cutoff is None else self.cutoff.isoformat(),
            "failed": [{"digest": o.digest, "error": why} for o, why in self.failed],
        }


HISTORY_READERS = 16
"""Histories, and stored objects, read (or checked and deleted) at once. One at a time, gc examined 13-20 objects
a second on a loaded machine (``bench/fleet.py``): weeks for a fleet's store; the server and S3 answer many at once."""


async def open_workflow_digests(client: Client, continued_since: datetime | None = None) -> tuple[set[str], int]:
    """Every sha256 the histories of open workflows mention (and of runs that continued as new
    after ``continued_since``), and how many open workflows there were."""
    digests: set[str] = set()
    count = 0
    queries = [OPEN_WORKFLOWS]
    if continued_since is not None:
        queries.append(_CONTINUED_SINCE.format(since=continued_since.astimezone(timezone.utc).isoformat()))

    async def read(workflow_id: str, run_id: str) -> None:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        # The wire form, not JSON: JSON would base64 the payload bytes that hold the references.
        raw = b"".join(event.SerializeToString() for event in history.events)
        digests.update(d.decode() for d in _DIGEST.findall(raw))

    for query in queries:
        reading: set[asyncio.Task[None]] = set()
        try:
            async for execution in client.list_workflows(query):
                count += query == OPEN_WORKFLOWS
                if len(reading) >= HISTORY_READERS:  # at most this many at once, and no more listed ahead
                    done, reading = await asyncio.wait(reading, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        task.result()
                reading.add(asyncio.create_task(read(execution.id, execution.run_id)))
            await asyncio.gather(*reading)
        finally:
            for task in reading:
                task.cancel()
    return digests, count


async def _reachable(
    store: PayloadStore, roots: set[str], by_digest: dict[str, list[StoredObject]], kept: set[str]
) -> None:
    """Add to ``kept`` every stored digest reachable from ``roots`` (reading kept blobs for more), a level at a
    time, ``HISTORY_READERS`` reads at once."""
    gate = asyncio.Semaphore(HISTORY_READERS)

    async def follow(digest: str, o: StoredObject) -> set[str]:
        async with gate:
            try:
                blob = await store.read_object(o.location)
            except Exception as exc:
                if await store.modified(o.location) is None:  # gone meanwhile (another gc): nothing to follow
                    return set()
                # Unread, what it names would look unreachable and be deleted: stop before deleting anything.
                raise PayloadMissingError(
                    f"payloads gc stopped, nothing deleted: sha256:{digest} is reachable but could not be read from "
                    f"{store.location} to follow what it references ({type(exc).__name__}: {exc}); run it again"
                ) from exc
        return {found.decode() for found in _DIGEST.findall(blob)}

    frontier = {d for d in roots if d in by_digest and d not in kept}
    while frontier:
        kept.update(frontier)
        named = await asyncio.gather(*(follow(d, o) for d in frontier for o in by_digest[d]))
        frontier = {d for found in named for d in found if d in by_digest and d not in kept}


async def collect_garbage(
    client: Client, store: PayloadStore, older_than: timedelta, *, delete: bool = False, now: datetime | None = None
) -> GcReport:
    started = now or datetime.now(timezone.utc)
    cutoff = started - older_than
    objects = [o async for o in store.list_objects()]
    by_digest: dict[str, list[StoredObject]] = {}
    for o in objects:
        by_digest.setdefault(o.digest, []).append(o)
    kept: set[str] = set()
    digests, open_count = await open_workflow_digests(client, cutoff)
    await _reachable(store, digests, by_digest, kept)
    candidates = [o for o in objects if o.digest not in kept and o.modified <= cutoff]
    # Again, now the sweep list exists: a run started, or continued as new, while the first listing
    # ran (or was not yet visible to it) protects what it reaches.
    digests, _ = await open_workflow_digests(client, cutoff)
    await _reachable(store, digests, by_digest, kept)
    report = GcReport(store=store.location, deleted=delete, open_workflows=open_count, cutoff=cutoff)
    for o in objects:
        if o.digest in kept:
            report.referenced += 1
        elif o.modified > cutoff:
            report.recent += 1
    swept = [o for o in candidates if o.digest not in kept]
    if not delete:
        report.garbage = swept
        return report
    # The last look (each object's time read again) and the deletes go a page of up to 1,000 at a time: one
    # request each per page on S3, one thread per batch locally, where two requests an object kept gc at 13-39
    # objects a second (bench/fleet.py).
    done = await store.delete_unchanged(swept, cutoff)
    report.garbage = done.deleted
    report.recent += len(done.recent)
    report.failed = done.failed
    return report
