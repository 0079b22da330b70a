"""The payload store: one place for large Temporal payloads and code-mode snapshots.

Temporal's ``ExternalStorage`` moves any payload of 256 KiB or more out of
history through a ``StorageDriver``. Code-mode snapshots go through the very
same driver instance (``PayloadStore``), so there is one mechanism, one
configuration and one place to operate: a local directory for the embedded
default, the SDK's S3 driver (``temporalio.contrib.aws.s3driver``, see
``s3_store.py``) when a bucket is configured.

Both back ends address content by SHA-256 and check it on the way back. What
happens when a payload cannot be found is in ``payload_unavailable.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import tempfile
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import ApplicationError

from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import PayloadIntegrityError, PayloadMissingError
from ..contracts.persisted_ids import named_object_key
from ..failures import to_application_error
from .payload_contexts import caching_contexts
from .payload_unavailable import AgentStepsPayloadConverter, TypedExternalStorage, TypedRetrievalDriver, error_of
from .s3_store import Deletion, PrefixedAioboto3Client, StoredObject, s3_location
from .store_requests import record

_BLOB_ENCODING = b"binary/plain"
LOCAL_DRIVER = "agentsteps.localdir"
_INLINE_READ_BYTES = 64 * 1024
"""Every ``code.resume`` loads its program snapshot (a few KiB), which took 0.18-0.20 ms read here
against 0.30-0.55 ms handed to a thread and back, on a loaded worker. (Writes always go to a thread:
they fsync.)"""


DELETE_TRIES = 3
"""Tries of a batch delete's failures (each with a fresh last look) before gc reports them."""
DELETE_BACKOFF_SECONDS = 0.5


class LocalDirStorageDriver(StorageDriver):
    """Content-addressed files under one directory: ``sha256/ab/abcdef...``.

    Claims carry only the digest, so any worker that mounts the same directory
    can read what another wrote.
    """

    def __init__(self, root: Path, driver_name: str = LOCAL_DRIVER) -> None:
        self._root = Path(root)
        self._name = driver_name

    def name(self) -> str:
        return self._name

    @property
    def root(self) -> Path:
        return self._root

    def type(self) -> str:
        return LOCAL_DRIVER

    def path_for(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise PayloadIntegrityError(f"not a sha256 digest: {digest!r}")
        return self._root / "sha256" / digest[:2] / digest

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        blobs = [p.SerializeToString() for p in payloads]
        # Always in a thread: each new file is fsynced twice (file and directory), which on a busy
        # disk takes milliseconds, and on the event loop that stalled every activation and activity of
        # the worker (py-spy: 14% of a throughput worker's samples, in os.fsync on the loop).
        return await asyncio.to_thread(self._store_all, blobs)

    def _store_all(self, blobs: list[bytes]) -> list[StorageDriverClaim]:
        claims = []
        for data in blobs:
            digest = hashlib.sha256(data).hexdigest()
            path = self.path_for(digest)
            if path.exists():
                os.utime(path)  # a fresh reference: the GC measures age from the last store
                record("reference")
            else:
                record("put", len(data))
                path.parent.mkdir(parents=True, exist_ok=True)
                # Write then rename: a reader never sees half a file, and two
                # workers storing the same content race harmlessly.
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    # On disk before the name: history may reference it the moment we return, and a
                    # machine crash must never leave that name on a truncated file.
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
                _fsync_dir(path.parent)  # the rename itself, so the name survives the crash too
            claims.append(StorageDriverClaim(claim_data={"hash_algorithm": "sha256", "hash_value": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        wanted = [c.claim_data for c in claims]
        if self._small(wanted):
            return self._retrieve_all(wanted)
        return await asyncio.to_thread(self._retrieve_all, wanted)

    def _small(self, claims: list[Mapping[str, str]]) -> bool:
        """True when every claimed file is there and together they fit ``_INLINE_READ_BYTES``;
        anything else (missing, malformed, large) goes to the thread, which raises the typed error."""
        total = 0
        for claim in claims:
            try:
                total += self.path_for(claim.get("hash_value", "")).stat().st_size
            except (OSError, PayloadIntegrityError):
                return False
            if total > _INLINE_READ_BYTES:
                return False
        return True

    def _retrieve_all(self, claims: list[Mapping[str, str]]) -> list[Payload]:
        payloads = []
        for claim in claims:
            digest = claim.get("hash_value", "")
            try:
                data = self.path_for(digest).read_bytes()
            except FileNotFoundError:
                raise PayloadMissingError(f"payload sha256:{digest} is not in the store {self._root}") from None
            if hashlib.sha256(data).hexdigest() != digest:
                raise PayloadIntegrityError(f"payload sha256:{digest} in {self._root} does not match its digest")
            record("get", len(data))
            payloads.append(Payload.FromString(data))
        return payloads

    async def list_objects(self) -> AsyncIterator[StoredObject]:
        for path in await asyncio.to_thread(lambda: sorted((self._root / "sha256").glob("??/*"))):
            if path.name.startswith(".") or len(path.name) != 64:
                continue
            stat = path.stat()
            yield StoredObject(str(path), path.name, datetime.fromtimestamp(stat.st_mtime, timezone.utc), stat.st_size)

    async def read_object(self, location: str) -> bytes:
        return await asyncio.to_thread(Path(location).read_bytes)

    async def modified(self, location: str) -> datetime | None:
        try:
            return datetime.fromtimestamp(Path(location).stat().st_mtime, timezone.utc)
        except FileNotFoundError:
            return None

    def own_path(self, location: str) -> Path:
        """``location`` if it names a payload file of this store (``sha256/ab/<digest>`` under the root, no
        link or ``..`` leading out of it); otherwise ``PayloadIntegrityError``."""
        path = Path(location) if isinstance(location, str) else None
        digest = path.name if path is not None else ""
        ok = (
            path is not None
            and len(digest) == 64
            and all(c in "0123456789abcdef" for c in digest)
            and path.parent.name == digest[:2]
            and path.parent.resolve() == (self._root / "sha256" / digest[:2]).resolve()
            and path.parent.resolve().is_relative_to(self._root.resolve())
        )
        if not ok or path is None:
            raise PayloadIntegrityError(
                f"refusing to delete {location!r}: not a payload file of the store {self._root}"
            )
        return path

    async def delete_unchanged(self, objects: Sequence[StoredObject], cutoff: datetime) -> Deletion:
        """Delete each file not stored or re-referenced after ``cutoff``: in one thread for the whole batch, each
        file's time read just before its unlink (a writer that touched it since keeps it)."""
        paths = [(self.own_path(o.location), o) for o in objects]
        return await asyncio.to_thread(self._delete_unchanged, paths, cutoff.timestamp())

    @staticmethod
    def _delete_unchanged(paths: list[tuple[Path, StoredObject]], cutoff: float) -> Deletion:
        out = Deletion()
        for path, o in paths:
            try:
                st = path.lstat()
                if not stat.S_ISREG(st.st_mode):
                    out.failed.append((o, "not a regular file (the store writes only files): left alone"))
                    continue
                if st.st_mtime > cutoff:
                    out.recent.append(o)
                    continue
                path.unlink()
            except FileNotFoundError:
                out.gone.append(o)
            except OSError as exc:
                out.failed.append((o, f"{type(exc).__name__}: {exc}"))
            else:
                out.deleted.append(o)
        return out


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PayloadStore:
    """Raw bytes in and out of the same driver Temporal uses for large payloads."""

    def __init__(self, driver: StorageDriver, threshold_bytes: int = 256 * 1024, location: str | None = None) -> None:
        self.driver = driver
        self.threshold_bytes = threshold_bytes
        self.location = location or driver.name()

    async def put(self, data: bytes) -> dict[str, str]:
        payload = Payload(metadata={"encoding": _BLOB_ENCODING}, data=data)
        [claim] = await self.driver.store(StorageDriverStoreContext(target=None), [payload])
        return dict(claim.claim_data)

    async def put_all(self, blobs: Sequence[bytes]) -> list[dict[str, str]]:
        """Several blobs in one driver call (one hop to the writing thread, one batch for S3)."""
        payloads = [Payload(metadata={"encoding": _BLOB_ENCODING}, data=data) for data in blobs]
        claims = await self.driver.store(StorageDriverStoreContext(target=None), payloads)
        return [dict(claim.claim_data) for claim in claims]

    async def get(self, claim: Mapping[str, str]) -> bytes:
        typed = TypedRetrievalDriver(self.driver, self.location)
        [payload] = await typed.retrieve(StorageDriverRetrieveContext(), [StorageDriverClaim(claim_data=dict(claim))])
        error = error_of(payload)
        if error is not None:
            raise error
        return payload.data

    def external_storage(self) -> ExternalStorage:
        # A reference written by a worker with another kind of store fails typed too.
        return TypedExternalStorage(
            drivers=[TypedRetrievalDriver(self.driver, self.location)],
            payload_size_threshold=self.threshold_bytes,
            location=self.location,
        )

    def data_converter(self) -> DataConverter:
        """The pydantic data converter with large payloads offloaded to this store."""
        return caching_contexts(
            pydantic_data_converter,
            payload_converter_class=AgentStepsPayloadConverter,
            external_storage=self.external_storage(),
        )

    async def list_objects(self) -> AsyncIterator[StoredObject]:
        if isinstance(self.driver, LocalDirStorageDriver):
            async for item in self.driver.list_objects():
                yield item
        else:
            client, bucket = self._s3()
            async for item in client.list_objects(bucket):
                yield item

    async def read_object(self, location: str) -> bytes:
        if isinstance(self.driver, LocalDirStorageDriver):
            return await self.driver.read_object(location)
        client, bucket = self._s3()
        return await client.read_object(bucket, location)

    async def read_named(self, name: str) -> bytes | None:
        """A small named object beside the content-addressed ones (``deployment/<name>``), or None."""
        if isinstance(self.driver, LocalDirStorageDriver):
            path = self.driver.root / named_object_key(name)
            return await asyncio.to_thread(lambda: path.read_bytes() if path.exists() else None)
        client, bucket = self._s3()
        return await client.read_named(bucket, named_object_key(name))

    async def write_named(self, name: str, data: bytes) -> None:
        if isinstance(self.driver, LocalDirStorageDriver):
            path = self.driver.root / named_object_key(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            return
        client, bucket = self._s3()
        await client.put_object(bucket=bucket, key=named_object_key(name), data=data)

    async def modified(self, location: str) -> datetime | None:
        """When the object was last stored or re-referenced (None once it is gone)."""
        if isinstance(self.driver, LocalDirStorageDriver):
            return await self.driver.modified(location)
        client, bucket = self._s3()
        return await client.modified(bucket, location)

    async def delete_unchanged(self, objects: Sequence[StoredObject], cutoff: datetime) -> Deletion:
        """Delete, in batches, each of ``objects`` not stored or re-referenced after ``cutoff`` (its time read
        again just before the delete). What failed is tried again, with a fresh last look, up to
        ``DELETE_TRIES`` times; what still fails comes back in ``failed``, kept. A location that is not a
        payload object of this store raises ``PayloadIntegrityError`` before anything is deleted."""
        out = Deletion()
        pending = list(objects)
        for attempt in range(DELETE_TRIES):
            if isinstance(self.driver, LocalDirStorageDriver):
                done = await self.driver.delete_unchanged(pending, cutoff)
            else:
                client, bucket = self._s3()
                done = await client.delete_unchanged(bucket, pending, cutoff)
            out.add(done)
            out.failed = done.failed
            pending = [o for o, _ in done.failed]
            if not pending:
                break
            await asyncio.sleep(DELETE_BACKOFF_SECONDS * 2**attempt)
        return out

    def _s3(self) -> tuple[PrefixedAioboto3Client, str]:
        client = getattr(self.driver, "_client", None)
        bucket = getattr(self.driver, "_bucket", None)
        if not isinstance(client, PrefixedAioboto3Client) or not isinstance(bucket, str):
            raise TypeError(f"cannot list the payload store {self.location}")
        return client, bucket

    async def aclose(self) -> None:
        client = getattr(self.driver, "_client", None)
        if isinstance(client, PrefixedAioboto3Client):
            await client.aclose()


def unreadable(what: str, exc: Exception) -> ApplicationError:
    """The failure for a stored object ``what`` that cannot be read: typed as what went wrong (a missing one
    ``PayloadMissingError``, an altered or foreign one ``PayloadIntegrityError``), never retried."""
    kind = PayloadMissingError if isinstance(exc, PayloadMissingError) else PayloadIntegrityError
    return to_application_error(kind(f"the run's stored {what} cannot be read: {exc}"))


def build_payload_store(settings: WorkerSettings) -> PayloadStore:
    cfg = settings.payload_store
    if cfg.s3_bucket:
        # Imported here: importing the S3 driver module needs no AWS packages, but keep the local path lean.
        from temporalio.contrib.aws.s3driver import S3StorageDriver

        driver: StorageDriver = S3StorageDriver(client=PrefixedAioboto3Client(cfg), bucket=cfg.s3_bucket)
        return PayloadStore(driver, cfg.threshold_bytes, s3_location(cfg))
    root = cfg.local_dir or Path(settings.state_dir) / "payloads"
    return PayloadStore(LocalDirStorageDriver(root), cfg.threshold_bytes, f"local directory {root}")


def build_data_converter(settings: WorkerSettings, store: PayloadStore | None = None) -> DataConverter:
    """Deprecated: the public home is ``agentsteps.worker.build_data_converter`` (the README sent clients here
    in 0.2.0); this one warns, and goes in 0.4."""
    warnings.warn(
        "agentsteps.storage.payload_store.build_data_converter is deprecated and goes in 0.4: "
        "use agentsteps.worker.build_data_converter",
        DeprecationWarning,
        stacklevel=2,
    )
    return (store or build_payload_store(settings)).data_converter()
