"""``agentsteps payloads gc``: delete stored payloads that no open workflow can still need.

Nothing else ever deletes from the payload store. A payload is kept when:

- an open workflow's history references it (its sha256 appears in the
  history: external-storage references and snapshot refs both carry it), or
  a kept payload references it (a large program status holding a snapshot
  ref, found by reading the kept blobs, transitively);
- or it was stored (or, in the local store, stored again) more recently than
  ``older_than``: a run that is writing it now may not have recorded the
  reference yet.

Everything else is garbage: it belongs to closed workflows, whose results
clients read within ``older_than``. The store is listed *before* histories are
read, so a reference recorded meanwhile always protects its payload. Dry run
unless ``delete`` is set. The S3 lifecycle-rule alternative is in docs/deployment.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from temporalio.client import Client

from ..storage.payload_store import PayloadStore
from ..storage.s3_store import StoredObject

_DIGEST = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
OPEN_WORKFLOWS = "ExecutionStatus = 'Running'"


@dataclass
class GcReport:
    store: str
    deleted: bool
    garbage: list[StoredObject] = field(default_factory=list)
    referenced: int = 0
    recent: int = 0
    open_workflows: int = 0

    @property
    def garbage_bytes(self) -> int:
        return sum(o.size for o in self.garbage)

    def summary(self) -> str:
        verb = "deleted" if self.deleted else "would delete (dry run; --delete to act)"
        return (
            f"{self.store}: {verb} {len(self.garbage)} payloads, {self.garbage_bytes} bytes; kept "
            f"{self.referenced} referenced by {self.open_workflows} open workflows and {self.recent} younger than the cutoff"
        )

    def as_json(self) -> dict:
        return {
            "store": self.store, "deleted": self.deleted, "garbage": [o.digest for o in self.garbage],
            "garbage_bytes": self.garbage_bytes, "referenced": self.referenced, "recent": self.recent,
            "open_workflows": self.open_workflows,
        }


async def open_workflow_digests(client: Client) -> tuple[set[str], int]:
    """Every sha256 the histories of open workflows mention, and how many workflows there were."""
    digests: set[str] = set()
    count = 0
    async for execution in client.list_workflows(OPEN_WORKFLOWS):
        count += 1
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        history = await handle.fetch_history()
        # The wire form, not JSON: JSON would base64 the payload bytes that hold the references.
        raw = b"".join(event.SerializeToString() for event in history.events)
        digests.update(d.decode() for d in _DIGEST.findall(raw))
    return digests, count


async def collect_garbage(
    client: Client, store: PayloadStore, older_than: timedelta, *, delete: bool = False, now: datetime | None = None
) -> GcReport:
    cutoff = (now or datetime.now(timezone.utc)) - older_than
    objects = [o async for o in store.list_objects()]
    digests, open_count = await open_workflow_digests(client)
    by_digest: dict[str, list[StoredObject]] = {}
    for o in objects:
        by_digest.setdefault(o.digest, []).append(o)
    # Kept blobs may reference more blobs: follow them.
    pending = [d for d in digests if d in by_digest]
    kept: set[str] = set()
    while pending:
        digest = pending.pop()
        if digest in kept:
            continue
        kept.add(digest)
        for o in by_digest[digest]:
            for found in _DIGEST.findall(await store.read_object(o.location)):
                if found.decode() in by_digest and found.decode() not in kept:
                    pending.append(found.decode())
    report = GcReport(store=store.location, deleted=delete, open_workflows=open_count)
    for o in objects:
        if o.digest in kept:
            report.referenced += 1
        elif o.modified > cutoff:
            report.recent += 1
        else:
            report.garbage.append(o)
    if delete and report.garbage:
        await store.delete_objects([o.location for o in report.garbage])
    return report
