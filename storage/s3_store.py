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
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from temporalio.contrib.aws.s3driver import S3StorageDriverClient  # the ABC only; no AWS packages

from ..contracts.config.settings import PayloadStoreSettings
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

    async def delete_objects(self, bucket: str, keys: Sequence[str]) -> None:
        raw, _ = await self._open()
        for start in range(0, len(keys), 1000):  # the S3 API's batch limit
            batch: list[ObjectIdentifierTypeDef] = [{"Key": k} for k in keys[start : start + 1000]]
            record("delete")
            await raw.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})

    async def aclose(self) -> None:
        if self._raw is not None:
            await self._raw.__aexit__(None, None, None)
            self._raw = self._inner = None


_ABSENT = {"NoSuchKey", "404", "NotFound"}


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def s3_location(cfg: PayloadStoreSettings) -> str:
    """How errors and the GC name the store: never a credential."""
    where = f" at {cfg.s3_endpoint_url}" if cfg.s3_endpoint_url else ""
    return f"s3://{cfg.s3_bucket}/{cfg.s3_prefix}{where}"
