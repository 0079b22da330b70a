"""Signed, content-addressed snapshots of paused programs.

A snapshot is a Monty interpreter's whole memory. Monty does not authenticate
dumps, so before loading one we check that a worker holding the key wrote it
for this very run: HMAC-SHA256 over the run key and the content digest. The
run key names the workflow chain (workflow id and the chain's first run id),
never one run's id, so a run reset by ``temporal workflow reset`` still loads
the snapshots it replays; snapshots signed by older builds over the run id
load through the legacy key the workflow passes beside it. The key never
leaves the workers (settings/env, or a key file in the state dir).

Keys rotate: each signature carries the signing key's id (a digest of the key,
so the id reveals nothing), new snapshots are signed with the current key, and
snapshots signed by a key listed in ``snapshot_previous_keys`` still load. A
run paused under the old key therefore survives the rotation.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from ...contracts.code.program import SnapshotRef
from ...contracts.config.settings import WorkerSettings
from ...contracts.errors import (
    DeploymentConfigError,
    PayloadIntegrityError,
    SnapshotIntegrityError,
    SnapshotKeyUnknownError,
)
from ...storage.payload_store import PayloadStore

_DOMAIN = b"agentsteps.snapshot.v1"
_KEY_ID_DOMAIN = b"agentsteps.snapshot-key-id.v1\0"
KEY_FILE = "snapshot.key"


MIN_KEY_CHARS = 16


def snapshot_key_bytes(text: str, source: str) -> bytes:
    """The one encoding of a snapshot key, wherever it comes from (``AGENTSTEPS_SNAPSHOT_KEY``, the
    ``[worker]`` setting, the previous keys, the key file): the text without surrounding whitespace,
    as UTF-8 bytes. So moving a key between the file and the environment changes nothing.

    Malformed (too short, or holding control or non-ASCII characters, such as a newline inside a
    multi-line Secret) is a ``DeploymentConfigError`` naming ``source``, never the key.
    """
    key = text.strip()
    if len(key) < MIN_KEY_CHARS:
        raise DeploymentConfigError(
            f"{source} is malformed: a snapshot key needs at least {MIN_KEY_CHARS} characters "
            f"(it has {len(key)}); make one with `openssl rand -hex 32`"
        )
    if any(not 32 <= ord(c) < 127 for c in key):
        raise DeploymentConfigError(
            f"{source} is malformed: a snapshot key is printable ASCII on one line (it holds a control or "
            "non-ASCII character); make one with `openssl rand -hex 32`"
        )
    return key.encode()


def _earlier_readings(text: str) -> list[bytes]:
    """How earlier releases turned this key text into bytes, so what they signed still verifies:
    the key file was decoded as hex, and the environment was used as given (whitespace and all)."""
    stripped = text.strip()
    readings = []
    try:
        readings.append(bytes.fromhex(stripped))
    except ValueError:
        pass
    if text != stripped:
        readings.append(text.encode())
    return [r for r in readings if len(r) >= MIN_KEY_CHARS and r != stripped.encode()]


def _key_text(settings: WorkerSettings) -> tuple[str, str]:
    """The current key's text and where it came from; the state dir's key file is created on first use."""
    if settings.snapshot_key is not None:
        return settings.snapshot_key.get_secret_value(), "AGENTSTEPS_SNAPSHOT_KEY (snapshot_key)"
    path = Path(settings.state_dir) / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: two workers starting together agree on one key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(), f"the key file {path}"
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path.read_text(), f"the key file {path}"


def load_snapshot_key(settings: WorkerSettings) -> bytes:
    """The configured key, or the state dir's key file, created on first use (one encoding for both)."""
    text, source = _key_text(settings)
    return snapshot_key_bytes(text, source)


def previous_snapshot_keys(settings: WorkerSettings) -> list[bytes]:
    """The keys rotated out, then every earlier reading of each key (current included) that differs."""
    texts = [k.get_secret_value() for k in settings.snapshot_previous_keys]
    keys = [snapshot_key_bytes(t, f"AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS (entry {i + 1})") for i, t in enumerate(texts)]
    for text in [_key_text(settings)[0], *texts]:
        keys += [k for k in _earlier_readings(text) if k not in keys]
    return keys


def key_id(key: bytes) -> str:
    return hashlib.sha256(_KEY_ID_DOMAIN + key).hexdigest()[:16]


class SnapshotVault:
    def __init__(self, store: PayloadStore, key: bytes, previous_keys: Sequence[bytes] = ()) -> None:
        for k in (key, *previous_keys):
            if len(k) < 16:
                raise ValueError("every snapshot key must be at least 16 bytes")
        self._store = store
        self._key = key
        self._key_id = key_id(key)
        # Current key first: a ref without a key id is tried against each in turn.
        self._keys = {self._key_id: key}
        for k in previous_keys:
            self._keys.setdefault(key_id(k), k)

    @staticmethod
    def _sign(key: bytes, run_key: str, digest: str) -> str:
        message = b"\0".join([_DOMAIN, run_key.encode(), digest.encode()])
        return hmac.new(key, message, hashlib.sha256).hexdigest()

    async def save(self, run_key: str, data: bytes) -> SnapshotRef:
        digest = hashlib.sha256(data).hexdigest()
        claim = await self._store.put(data)
        return SnapshotRef(
            sha256=digest,
            size=len(data),
            signature=self._sign(self._key, run_key, digest),
            driver=self._store.driver.name(),
            claim=claim,
            key_id=self._key_id,
        )

    def _verified(self, run_key: str, ref: SnapshotRef) -> bool:
        if ref.key_id is not None:
            candidates = [self._keys[ref.key_id]] if ref.key_id in self._keys else []
        else:
            candidates = list(self._keys.values())
        return any(hmac.compare_digest(self._sign(k, run_key, ref.sha256), ref.signature) for k in candidates)

    async def load(self, run_key: str, ref: SnapshotRef, legacy_run_key: str | None = None) -> bytes:
        """The snapshot's bytes, if a worker key signed it for ``run_key`` (or, written by an older build,
        for ``legacy_run_key``); else ``SnapshotIntegrityError``."""
        if ref.key_id is not None and ref.key_id not in self._keys:
            # A key rollout (or this worker's key is wrong): not the snapshot's fault, so never final.
            raise SnapshotKeyUnknownError(
                f"snapshot {ref.sha256[:12]} is signed with key id {ref.key_id}, which this worker does not hold "
                f"(it signs with {self._key_id}); retried until a worker with that key takes it"
            )
        if not self._verified(run_key, ref) and not (legacy_run_key and self._verified(legacy_run_key, ref)):
            raise SnapshotIntegrityError(f"snapshot {ref.sha256[:12]} is not signed for this run by a worker key")
        try:
            data = await self._store.get(ref.claim)
        except PayloadIntegrityError as exc:
            raise SnapshotIntegrityError(f"snapshot {ref.sha256[:12]}: {exc}") from None
        if hashlib.sha256(data).hexdigest() != ref.sha256:
            raise SnapshotIntegrityError(f"snapshot {ref.sha256[:12]} was altered in the store")
        return data
