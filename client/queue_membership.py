"""A worker proves to its task queue's registry, before it polls, that it shares the queue's store, key and config.

The rule is ``contracts/queue_registry.py``'s; this is the worker's side of it: join (found the queue, or
look the queue's store token up in this worker's own store and show what it found), then renew the lease
while polling, and leave on the way out. A refusal is one ``QueueMismatchError`` line naming what differs
and what the operator can do. A member told it was replaced (an operator's ``--replace-fleet`` takeover)
stops polling.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

from ..contracts.errors import QueueMismatchError
from ..contracts.names import (
    QUEUE_JOIN_UPDATE,
    QUEUE_LEAVE_SIGNAL,
    QUEUE_REGISTRY_TASK_QUEUE,
    QUEUE_REGISTRY_WORKFLOW,
)
from ..contracts.persisted_ids import queue_registry_id
from ..contracts.queue_registry import (
    JoinAnswer,
    JoinRequest,
    LeaveRequest,
    QueueFingerprint,
    RegistryState,
    StoreToken,
)
from ..storage.payload_store import PayloadStore

logger = logging.getLogger(__name__)

JOIN_TIMEOUT_SECONDS = 120.0
_ROUNDS = 6
"""offer / verify / answer, with room for a founder racing this worker."""


@dataclass
class Membership:
    client: Client
    task_queue: str
    request: JoinRequest
    """The request that was accepted, as a renewal sends it again."""

    async def renew(self) -> JoinAnswer:
        return await asyncio.wait_for(
            _send_join(self.client, self.task_queue, self.request), self.request.lease_seconds / 3
        )

    async def leave(self) -> None:
        with suppress(Exception):  # best effort, and quick (the server may be gone): else the lease runs out
            handle = self.client.get_workflow_handle(queue_registry_id(self.task_queue))
            signal = handle.signal(
                QUEUE_LEAVE_SIGNAL, LeaveRequest(worker=self.request.worker), rpc_timeout=timedelta(seconds=2)
            )
            await asyncio.wait_for(signal, 3)


async def join_queue(
    client: Client,
    store: PayloadStore,
    task_queue: str,
    fingerprint: QueueFingerprint,
    *,
    worker: str,
    replace: bool = False,
    lease_seconds: float = 30.0,
) -> Membership:
    """Join ``task_queue``'s registry or raise ``QueueMismatchError`` naming what differs."""
    request = JoinRequest(worker=worker, fingerprint=fingerprint, lease_seconds=lease_seconds, replace=replace)
    for _ in range(_ROUNDS):
        try:
            answer = await asyncio.wait_for(_send_join(client, task_queue, request), JOIN_TIMEOUT_SECONDS)
        except asyncio.TimeoutError:
            raise QueueMismatchError(
                f"task queue {task_queue!r}: its registry did not answer in {JOIN_TIMEOUT_SECONDS:.0f} s (nothing "
                f"serves the task queue {QUEUE_REGISTRY_TASK_QUEUE!r}, or the server is overloaded); retry"
            ) from None
        if answer.status == "accepted":
            assert answer.token is not None
            accepted = request.model_copy(
                update={
                    "offered": None,
                    "replace": False,
                    "checked": answer.token.name,
                    "found": answer.token.digest,
                    "renewal": True,
                }
            )
            return Membership(client, task_queue, accepted)
        if answer.status == "offer":
            request = request.model_copy(update={"offered": await _write_token(store)})
        elif answer.status == "verify":
            assert answer.token is not None
            found = await store.read_named(answer.token.name)
            digest = hashlib.sha256(found).hexdigest() if found is not None else None
            request = request.model_copy(update={"checked": answer.token.name, "found": digest, "offered": None})
        else:
            raise QueueMismatchError(refusal(task_queue, answer, store))
    raise QueueMismatchError(f"task queue {task_queue!r}: its registry kept changing while this worker joined; retry")


@asynccontextmanager
async def renewing(
    membership: Membership, on_replaced: Callable[[str], Awaitable[None]], every: float | None = None
) -> AsyncIterator[None]:
    """Renew the lease every third of its length while the body runs; leave after it."""
    period = every or membership.request.lease_seconds / 3

    async def loop() -> None:
        while True:
            await asyncio.sleep(period)
            try:
                answer = await membership.renew()
            except Exception as exc:  # noqa: BLE001 - a missed renewal only shortens the lease
                logger.warning("could not renew this worker's lease on task queue %r: %s", membership.task_queue, exc)
                continue
            if answer.status != "accepted":
                why = (
                    f"this worker no longer belongs to task queue {membership.task_queue!r}: another fleet took it "
                    f"over (--replace-fleet) or its lease ran out; it stops polling"
                )
                logger.error(why)
                await on_replaced(why)
                return

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        await membership.leave()


def refusal(task_queue: str, answer: JoinAnswer, store: PayloadStore) -> str:
    """One line: what differs, with whom, and what the operator can do."""
    what = []
    for part in answer.differs:
        if part == "store":
            where = answer.token.location if answer.token is not None and answer.token.location else "elsewhere"
            what.append(
                f"another payload store (this worker's is {store.location}, the queue's is {where}: share one "
                "state directory, or one S3 bucket)"
            )
        elif part == "key_id":
            what.append(
                "another snapshot key (set AGENTSTEPS_SNAPSHOT_KEY to the queue's; to rotate, keep the old one in "
                "AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS)"
            )
        else:
            what.append(f"other {_PART_WORDS.get(part, part)}")
    holders = ", ".join(answer.holders) or "its workers"
    return (
        f"task queue {task_queue!r} is served by {holders} with {'; '.join(what)}: two workers on one queue must "
        f"agree, or a run's outcome depends on which one takes it. Use their config; or give this worker its own "
        f"queue (AGENTSTEPS_TASK_QUEUE); or, in a rolling upgrade to an incompatible config, take the queue over "
        f"with `agentsteps worker --replace-fleet` (their leases end within {answer.lease_left_seconds:.0f} s of "
        "their last renewal once they stop)"
    )


_PART_WORDS = {
    "tools": "tools (names or their approval and delivery policies, MCP servers)",
    "models": "models (provider URLs, API keys set or named)",
    "quotas": "quotas, budgets or prices",
}


async def _write_token(store: PayloadStore) -> StoreToken:
    """A random object in this worker's store: a worker that reads it back shares the store."""
    data = secrets.token_bytes(32)
    name = f"queue-token-{hashlib.sha256(data).hexdigest()[:16]}"
    await store.write_named(name, data)
    return StoreToken(name=name, digest=hashlib.sha256(data).hexdigest(), location=store.location)


async def _send_join(client: Client, task_queue: str, request: JoinRequest) -> JoinAnswer:
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        QUEUE_REGISTRY_WORKFLOW,
        RegistryState(),
        id=queue_registry_id(task_queue),
        task_queue=QUEUE_REGISTRY_TASK_QUEUE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    answer: JoinAnswer = await client.execute_update_with_start_workflow(
        QUEUE_JOIN_UPDATE, request, start_workflow_operation=start, result_type=JoinAnswer
    )
    return answer


__all__ = ["Membership", "join_queue", "refusal", "renewing"]
