"""Is this worker's snapshot key the deployment's? Checked at start, against the shared store.

A worker with the wrong key would report ready and then fail (or, since the
rollout fix, wait on) every paused program it is handed. So the first worker
of a deployment writes a key-check record to the shared payload store: its
key id and an HMAC over it made with the key (proof that the writer held it,
never the key). Every later worker compares:

| the record says                         | the worker                                   |
|-----------------------------------------|----------------------------------------------|
| nothing yet                             | writes its own (it is the first)             |
| its key id, and the HMAC verifies       | starts                                       |
| one of its previous keys' ids, verified | starts and records its key (rotation moves on) |
| any other key id, or an HMAC that fails | is refused: ``DeploymentConfigError``        |

A deliberate key change without rotation: delete ``deployment/snapshot-key-check.json``
from the store (docs/deployment.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence

from ...contracts.errors import DeploymentConfigError
from ...storage.payload_store import PayloadStore
from .snapshots import key_id

CHECK_NAME = "snapshot-key-check.json"
_DOMAIN = b"agentsteps.snapshot-key-check.v1\0"


def _record(key: bytes) -> bytes:
    ident = key_id(key)
    mac = hmac.new(key, _DOMAIN + ident.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"key_id": ident, "mac": mac}).encode()


def _verifies(key: bytes, mac: str) -> bool:
    expected = hmac.new(key, _DOMAIN + key_id(key).encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, mac)


async def check_deployment_key(store: PayloadStore, key: bytes, previous: Sequence[bytes] = ()) -> None:
    """Refuse a key that does not match the deployment's (see the table above)."""
    mine = key_id(key)
    raw = await store.read_named(CHECK_NAME)
    if raw is None:
        await store.write_named(CHECK_NAME, _record(key))
        return
    try:
        record = json.loads(raw)
        recorded, mac = str(record["key_id"]), str(record["mac"])
    except (ValueError, KeyError, TypeError):
        raise DeploymentConfigError(
            f"the snapshot key check in {store.location} (deployment/{CHECK_NAME}) is unreadable; "
            "delete it and start one worker with the deployment's key"
        ) from None
    known = {key_id(k): k for k in (key, *previous)}
    if recorded in known and _verifies(known[recorded], mac):
        if recorded != mine:
            await store.write_named(CHECK_NAME, _record(key))  # a rotation: the deployment's key is now ours
        return
    raise DeploymentConfigError(
        f"this worker's snapshot key (id {mine}) does not match the deployment's (id {recorded}, recorded in "
        f"{store.location} by the first worker): it could not load the paused programs the others write. Set "
        "AGENTSTEPS_SNAPSHOT_KEY to the deployment's key; to rotate, keep the current key in "
        'AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS (docs/deployment.md, "Rotating the snapshot key")'
    )
