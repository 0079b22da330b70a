"""S3 (or S3-compatible) payload storage through temporalio's own ``S3StorageDriver``.

The SDK driver stores, deduplicates and verifies; this module only supplies
its client: aioboto3 opened lazily inside the running event loop (building a
data converter needs no loop and no AWS packages), credentials and endpoint
from ``WorkerSettings`` (the one loader read ``AWS_*`` and the config file),
and a key prefix so one bucket can hold several deployments. ``list_objects``
and ``delete_objects`` serve ``agentsteps payloads gc``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from temporalio.contrib.aws.s3driver import S3StorageDriverClient  # the ABC only; no AWS packages

from ..contracts.config.settings import PayloadStoreSettings
from ..contracts.errors import PayloadIntegrityError
from .store_requests import record

if TYPE_CHECKING:  # the stubs come with the s3 extra, as aioboto3 does
    from types_aiobotocore_s3 import S3Client
    from types_aiobotocore_s3.type_defs import ObjectIdentifierTypeDef


@dataclass(frozen=True)
class StoredObject:
    """One object in a payload store, as the garbage collector sees it."""

    location: str
    """S3 key or file path: what ``delete`` takes."""
    digest: str
    modified: datetime
    size: int


@dataclass
class Deletion:
    """What a batch delete did with each object it was given (``delete_unchanged``)."""

    deleted: list[StoredObject] = field(default_factory=list)
    recent: list[StoredObject] = field(default_factory=list)
    """Stored or re-referenced after the cutoff at the last look: in use, kept."""
    gone: list[StoredObject] = field(default_factory=list)
    """Already absent at the last look (another gc, or a retried batch that had in fact succeeded)."""
    failed: list[tuple[StoredObject, str]] = field(default_factory=list)
    """The store refused or failed the delete: kept, with the store's reason."""

    def add(self, other: Deletion) -> None:
        self.deleted += other.deleted
        self.recent += other.recent
        self.gone += other.gone


DELETE_BATCH = 1000
"""Keys per S3 ``DeleteObjects`` request: the API's limit."""
_OBJECT_KEY = re.compile(r"v0/(?:[^/]+/)*d/sha256/[0-9a-f]{64}")
"""What the SDK driver writes under the prefix (``v0/ns/<ns>/.../d/sha256/<digest>``); gc deletes nothing else."""


class PrefixedAioboto3Client(S3StorageDriverClient):
    """Every key the SDK driver uses, under ``prefix``; the client opened on first use."""

    def __init__(self, cfg: PayloadStoreSettings) -> None:
        self._cfg = cfg
        self._prefix = cfg.s3_prefix
        self._raw: S3Client | None = None
        self._inner: S3StorageDriverClient | None = None
        self._lock = asyncio.Lock()

    async def _open(self) -> tuple[S3Client, S3StorageDriverClient]:
        async with self._lock:
            if self._raw is None or self._inner is None:
                try:
                    import aioboto3
                    from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client
                except ImportError as exc:  # pragma: no cover - depends on the install
                    raise RuntimeError("the S3 payload store needs the s3 extra: pip install 'agentsteps[s3]'") from exc
                cfg = self._cfg

                def secret(value: Any) -> str | None:
                    return value.get_secret_value() if value is not None else None

                session = aioboto3.Session(
                    aws_access_key_id=secret(cfg.s3_access_key_id),
                    aws_secret_access_key=secret(cfg.s3_secret_access_key),
                    aws_session_token=secret(cfg.s3_session_token),
                    region_name=cfg.s3_region,
                )
                context = session.client("s3", endpoint_url=cfg.s3_endpoint_url)
                raw: S3Client = await context.__aenter__()
                self._raw, self._inner = raw, new_aioboto3_client(raw)
            return self._raw, self._inner

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        record("put", len(data))
        await (await self._open())[1].put_object(bucket=bucket, key=self._prefix + key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        """Whether the object is there, and if so, marked referenced now.

        The SDK driver skips uploading content that already exists, so without
        this an object re-used by a new run (a new session whose first segment
        equals an old one's) would keep its first upload's age, and ``payloads
        gc`` (or a lifecycle rule) would take it from under the new run. An
        in-place copy with new metadata sets ``LastModified`` to now, server-side,
        in one request, as the HEAD it replaces.
        """
        raw, _ = await self._open()
        full = self._prefix + key
        record("reference")
        try:
            await raw.copy_object(
                Bucket=bucket,
                Key=full,
                CopySource={"Bucket": bucket, "Key": full},
                MetadataDirective="REPLACE",
                Metadata={"agentsteps-referenced": datetime.now(timezone.utc).isoformat()},
            )
        except Exception as exc:
            if _error_code(exc) in _ABSENT:
                return False
            raise
        return True

    async def read_named(self, bucket: str, key: str) -> bytes | None:
        """An object under the prefix by name, or None when there is none."""
        raw, _ = await self._open()
        record("get")
        try:
            response = await raw.get_object(Bucket=bucket, Key=self._prefix + key)
        except Exception as exc:
            if _error_code(exc) in _ABSENT:
                return None
            raise
        data: bytes = await response["Body"].read()
        return data

    async def modified(self, bucket: str, key: str) -> datetime | None:
        """An object's ``LastModified`` by its full key (None once it is gone), for the GC's last look."""
        raw, _ = await self._open()
        record("head")
        try:
            head = await raw.head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            if _error_code(exc) in _ABSENT:
                return None
            raise
        return head["LastModified"]

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        data = await (await self._open())[1].get_object(bucket=bucket, key=self._prefix + key)
        record("get", len(data))
        return data

    def describe(self) -> Mapping[str, str]:
        return {"endpoint_url": self._cfg.s3_endpoint_url or "aws", "prefix": self._prefix}

    async def list_objects(self, bucket: str) -> AsyncIterator[StoredObject]:
        raw, _ = await self._open()
        paginator = raw.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=bucket, Prefix=self._prefix):
            record("list")
            for item in page.get("Contents", []):
                key: str = item["Key"]
                digest = key.rsplit("/", 1)[-1]
                if "/d/sha256/" in key and len(digest) == 64:
                    yield StoredObject(key, digest, item["LastModified"], int(item["Size"]))

    async def read_object(self, bucket: str, key: str) -> bytes:
        """An object by its full key, as ``list_objects`` gave it (prefix included)."""
        raw, _ = await self._open()
        response = await raw.get_object(Bucket=bucket, Key=key)
        data: bytes = await response["Body"].read()
        record("get", len(data))
        return data

    def own_key(self, key: str) -> str:
        """``key`` if it names a payload object of this deployment (under the prefix, the driver's shape);
        otherwise ``PayloadIntegrityError``: gc never deletes another deployment's keys or a foreign name."""
        if (
            not isinstance(key, str)
            or not key.startswith(self._prefix)
            or not _OBJECT_KEY.fullmatch(key[len(self._prefix) :])
        ):
            raise PayloadIntegrityError(
                f"refusing to delete {key!r}: not a payload object under the prefix {self._prefix!r}"
            )
        return key

    async def delete_unchanged(self, bucket: str, objects: Sequence[StoredObject], cutoff: datetime) -> Deletion:
        """Delete each object not stored or re-referenced after ``cutoff``, a page of keys at a time.

        The last look is a listing of the objects' key range, just before each ``DeleteObjects``: one LIST
        and one DELETE for up to ``DELETE_BATCH`` objects (a closed session's objects share its run's key
        prefix, so they list together), where a HEAD and a DELETE for each took two requests an object.
        S3 lists what was written or copied before the LIST began (strong read-after-write consistency),
        so an object re-referenced before the last look lists as recent and is kept. A page whose request
        fails, and each key S3 reports it could not delete, come back in ``failed`` (kept)."""
        wanted = sorted({self.own_key(o.location): o for o in objects}.items())
        raw, _ = await self._open()
        out = Deletion()
        at, after = 0, ""
        while at < len(wanted):
            # Just before the next key (a key with one character less sorts before it), or past a full page
            # of foreign keys that sorted between.
            after = max(after, wanted[at][0][:-1])
            try:
                record("list")
                page = await raw.list_objects_v2(
                    Bucket=bucket, Prefix=self._prefix, StartAfter=after, MaxKeys=DELETE_BATCH
                )
            except Exception as exc:
                out.failed += [(o, f"listing before the delete failed: {_reason(exc)}") for _, o in wanted[at:]]
                return out
            listed = {item["Key"]: item["LastModified"] for item in page.get("Contents", [])}
            last = max(listed) if listed and page.get("IsTruncated") else None
            if last is not None:
                after = last
            doomed: list[StoredObject] = []
            while at < len(wanted) and (last is None or wanted[at][0] <= last):
                key, o = wanted[at]
                at += 1
                if key not in listed:
                    out.gone.append(o)
                elif listed[key] > cutoff:
                    out.recent.append(o)
                else:
                    doomed.append(o)
            if doomed:
                await self._delete_page(raw, bucket, doomed, out)
        return out

    async def _delete_page(self, raw: S3Client, bucket: str, doomed: list[StoredObject], out: Deletion) -> None:
        batch: list[ObjectIdentifierTypeDef] = [{"Key": o.location} for o in doomed]
        try:
            record("delete")
            answer = await raw.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
        except Exception as exc:
            out.failed += [(o, f"DeleteObjects failed: {_reason(exc)}") for o in doomed]
            return
        # Quiet mode answers with the keys it could not delete only.
        refused = {e.get("Key", ""): f"{e.get('Code', '?')}: {e.get('Message', '')}" for e in answer.get("Errors", [])}
        for o in doomed:
            if o.location in refused:
                out.failed.append((o, refused[o.location]))
            else:
                out.deleted.append(o)

    async def aclose(self) -> None:
        if self._raw is not None:
            await self._raw.__aexit__(None, None, None)
            self._raw = self._inner = None


_ABSENT = {"NoSuchKey", "404", "NotFound"}


def _reason(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def s3_location(cfg: PayloadStoreSettings) -> str:
    """How errors and the GC name the store: never a credential."""
    where = f" at {cfg.s3_endpoint_url}" if cfg.s3_endpoint_url else ""
    return f"s3://{cfg.s3_bucket}/{cfg.s3_prefix}{where}"
