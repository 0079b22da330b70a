"""The payload store: one place for large Temporal payloads and code-mode snapshots.

Temporal's ``ExternalStorage`` moves any payload of 256 KiB or more out of
history through a ``StorageDriver``. Code-mode snapshots go through the very
same driver instance (``PayloadStore``), so there is one mechanism, one
configuration and one place to operate: a local directory for the embedded
default, the SDK's S3 driver (``temporalio.contrib.aws.s3driver``) when a
bucket is configured.

Both back ends address content by SHA-256 and check it on the way back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriverClient  # the ABC only; no AWS packages
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import PayloadIntegrityError

_BLOB_ENCODING = b"binary/plain"


class LocalDirStorageDriver(StorageDriver):
    """Content-addressed files under one directory: ``sha256/ab/abcdef...``.

    Claims carry only the digest, so any worker that mounts the same directory
    can read what another wrote.
    """

    def __init__(self, root: Path, driver_name: str = "agentsteps.localdir") -> None:
        self._root = Path(root)
        self._name = driver_name

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "agentsteps.localdir"

    def path_for(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise PayloadIntegrityError(f"not a sha256 digest: {digest!r}")
        return self._root / "sha256" / digest[:2] / digest

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._store_all, [p.SerializeToString() for p in payloads])

    def _store_all(self, blobs: list[bytes]) -> list[StorageDriverClaim]:
        claims = []
        for data in blobs:
            digest = hashlib.sha256(data).hexdigest()
            path = self.path_for(digest)
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                # Write then rename: a reader never sees half a file, and two
                # workers storing the same content race harmlessly.
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            claims.append(StorageDriverClaim(claim_data={"hash_algorithm": "sha256", "hash_value": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(self._retrieve_all, [c.claim_data for c in claims])

    def _retrieve_all(self, claims: list[Mapping[str, str]]) -> list[Payload]:
        payloads = []
        for claim in claims:
            digest = claim.get("hash_value", "")
            try:
                data = self.path_for(digest).read_bytes()
            except FileNotFoundError:
                raise PayloadIntegrityError(f"payload {digest} is not in the store") from None
            if hashlib.sha256(data).hexdigest() != digest:
                raise PayloadIntegrityError(f"payload {digest} does not match its digest")
            payloads.append(Payload.FromString(data))
        return payloads


class PayloadStore:
    """Raw bytes in and out of the same driver Temporal uses for large payloads."""

    def __init__(self, driver: StorageDriver, threshold_bytes: int = 256 * 1024) -> None:
        self.driver = driver
        self.threshold_bytes = threshold_bytes

    async def put(self, data: bytes) -> dict[str, str]:
        payload = Payload(metadata={"encoding": _BLOB_ENCODING}, data=data)
        [claim] = await self.driver.store(StorageDriverStoreContext(target=None), [payload])
        return dict(claim.claim_data)

    async def get(self, claim: Mapping[str, str]) -> bytes:
        [payload] = await self.driver.retrieve(StorageDriverRetrieveContext(), [StorageDriverClaim(claim_data=claim)])
        return payload.data

    def external_storage(self) -> ExternalStorage:
        return ExternalStorage(drivers=[self.driver], payload_size_threshold=self.threshold_bytes)

    def data_converter(self) -> DataConverter:
        """The pydantic data converter with large payloads offloaded to this store."""
        return dataclasses.replace(pydantic_data_converter, external_storage=self.external_storage())


def build_payload_store(settings: WorkerSettings) -> PayloadStore:
    cfg = settings.payload_store
    if cfg.s3_bucket:
        driver: StorageDriver = _s3_driver(cfg.s3_bucket, cfg.s3_region, cfg.s3_endpoint_url)
    else:
        driver = LocalDirStorageDriver(cfg.local_dir or Path(settings.state_dir) / "payloads")
    return PayloadStore(driver, cfg.threshold_bytes)


def build_data_converter(settings: WorkerSettings, store: PayloadStore | None = None) -> DataConverter:
    """Pass the worker's ``PayloadStore`` so snapshots and payloads share one driver."""
    return (store or build_payload_store(settings)).data_converter()


def _s3_driver(bucket: str, region: str | None, endpoint_url: str | None) -> StorageDriver:
    # Imported here: the S3 path needs aioboto3, which the local default does not.
    from temporalio.contrib.aws.s3driver import S3StorageDriver

    return S3StorageDriver(client=_LazyAioboto3Client(region, endpoint_url), bucket=bucket)


class _LazyAioboto3Client(S3StorageDriverClient):
    """Opens the aioboto3 client on first use, inside the worker's event loop,
    so building the data converter needs no running loop and no AWS packages."""

    def __init__(self, region: str | None, endpoint_url: str | None) -> None:
        self._region = region
        self._endpoint_url = endpoint_url
        self._inner: Any = None
        self._lock = asyncio.Lock()

    async def _client(self) -> Any:
        async with self._lock:
            if self._inner is None:
                import aioboto3
                from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

                context = aioboto3.Session().client("s3", region_name=self._region, endpoint_url=self._endpoint_url)
                self._inner = new_aioboto3_client(await context.__aenter__())
            return self._inner

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await (await self._client()).put_object(bucket=bucket, key=key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return await (await self._client()).object_exists(bucket=bucket, key=key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return await (await self._client()).get_object(bucket=bucket, key=key)

    def describe(self) -> Mapping[str, str]:
        return {"client": "aioboto3", "region": self._region or "", "endpoint_url": self._endpoint_url or ""}
