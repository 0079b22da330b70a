"""What the workers of one task queue must share, and the rule a queue's registry applies to a newcomer.

Workers on one queue take each other's tasks: a run started by one is continued by another. So they must
read each other's payloads (one store), verify each other's snapshots (one key), and offer the same tools,
models and quotas, or a run's outcome depends on which worker polled first. Each worker proves that before
it polls, to the queue's registry (``workflows/queue_registry.py``, one ``QueueRegistry`` workflow per
queue), which applies ``decide``:

| the registry holds                         | the newcomer                                         |
|--------------------------------------------|------------------------------------------------------|
| no live lease (first worker, or all gone)  | founds the queue: its fingerprint and store token    |
| live leases, same fingerprint, token found | joins (a lease, renewed while it runs)               |
| live leases, anything differs              | is refused, naming what differs                      |
| anything, and the newcomer says ``replace`` | founds the queue; the old members are told to stop   |

The store is proven by a token: the founder writes a random object into its store and the registry
records its name and digest; a newcomer reads that name from *its* store, and a missing or different
object is another store. The snapshot key is proven by its key id (a hash, never the key); tools, models
and quotas by hashes of their canonical config. No secret is ever sent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PARTS: dict[str, str] = {
    "store": "payload store",
    "key_id": "snapshot key",
    "tools": "tools",
    "models": "models",
    "quotas": "quotas, budgets and prices",
}
"""Each fingerprint part, as a refusal names it."""


class QueueFingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key_id: str
    """The id of the worker's snapshot key (``key_id``: a domain-separated hash, never the key)."""
    previous_key_ids: list[str] = Field(default_factory=list)
    """Keys it still verifies (a rotation): it joins a queue whose key is one of them."""
    tools: str
    models: str
    quotas: str


class StoreToken(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The object's name in the store (``PayloadStore.read_named``)."""
    digest: str
    """sha256 of its bytes."""
    location: str = ""
    """Where the founder's store is, for the refusal (a path or bucket; never a credential)."""


class JoinRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    worker: str
    """The worker's id (its Temporal identity plus a random suffix)."""
    fingerprint: QueueFingerprint
    lease_seconds: float = Field(default=30.0, gt=0, le=3600)
    offered: StoreToken | None = None
    """A token the worker just wrote into its store, to found the queue with (asked for by ``offer``)."""
    checked: str | None = None
    """The name of the queue token the worker looked up in its store ..."""
    found: str | None = None
    """... and the digest of what it found there (None: nothing)."""
    replace: bool = False
    """Found the queue even though live workers disagree (an operator's explicit takeover)."""
    renewal: bool = False
    """A member renewing its lease: it never founds the queue again, it is told it was replaced."""


class LeaveRequest(BaseModel):
    worker: str


class JoinAnswer(BaseModel):
    status: Literal["accepted", "refused", "verify", "offer", "replaced"]
    """``verify``: read ``token`` from your store and ask again; ``offer``: write a token and ask again;
    ``replaced``: another fingerprint took the queue over (a member renewing its lease must stop)."""
    token: StoreToken | None = None
    differs: list[str] = Field(default_factory=list)
    """The parts (``PARTS`` keys) that differ from the queue's."""
    holders: list[str] = Field(default_factory=list)
    """The live workers holding the queue (the first few)."""
    lease_left_seconds: float = 0.0
    """When the last of them expires, if none renews."""


class RegistryState(BaseModel):
    fingerprint: QueueFingerprint | None = None
    token: StoreToken | None = None
    leases: dict[str, float] = Field(default_factory=dict)
    """worker -> when its lease ends (epoch seconds, workflow time)."""


def differing(queue: QueueFingerprint, mine: QueueFingerprint) -> list[str]:
    out = []
    if queue.key_id != mine.key_id and queue.key_id not in mine.previous_key_ids:
        out.append("key_id")
    out += [part for part in ("tools", "models", "quotas") if getattr(queue, part) != getattr(mine, part)]
    return out


def decide(state: RegistryState, request: JoinRequest, now: float) -> JoinAnswer:
    """The registry's answer to a join or a renewal, changing ``state`` when it accepts."""
    state.leases = {w: end for w, end in state.leases.items() if end > now}
    others = {w: end for w, end in state.leases.items() if w != request.worker}
    token, queue = state.token, state.fingerprint
    proven = token is not None and request.checked == token.name and request.found == token.digest
    if proven and queue is not None and not differing(queue, request.fingerprint):
        state.leases[request.worker] = now + request.lease_seconds
        return JoinAnswer(status="accepted", token=token)
    if request.renewal and token is None and request.checked is not None and request.found is not None:
        # The registry itself was lost (terminated, a new namespace history): its members found it again.
        state.fingerprint, state.token = request.fingerprint, StoreToken(name=request.checked, digest=request.found)
        state.leases[request.worker] = now + request.lease_seconds
        return JoinAnswer(status="accepted", token=state.token)
    if request.renewal:
        # A member whose queue now holds another token or fingerprint: an operator's takeover replaced it.
        return _answer("replaced", state, others, ["store"] if not proven else [], now)
    if not others or request.replace or token is None or queue is None:
        if request.offered is None:
            return JoinAnswer(status="offer")
        state.fingerprint, state.token = request.fingerprint, request.offered
        state.leases = {request.worker: now + request.lease_seconds}
        return JoinAnswer(status="accepted", token=request.offered)
    if request.checked != token.name:
        return JoinAnswer(status="verify", token=token)
    parts = (["store"] if request.found != token.digest else []) + differing(queue, request.fingerprint)
    return _answer("refused", state, others, parts, now)


def _answer(
    status: Literal["refused", "replaced"], state: RegistryState, others: dict[str, float], parts: list[str], now: float
) -> JoinAnswer:
    return JoinAnswer(
        status=status,
        token=state.token,
        differs=parts,
        holders=sorted(others)[:3],
        lease_left_seconds=max((end - now for end in others.values()), default=0.0),
    )


__all__ = [
    "PARTS",
    "JoinAnswer",
    "JoinRequest",
    "LeaveRequest",
    "QueueFingerprint",
    "RegistryState",
    "StoreToken",
    "decide",
    "differing",
]
