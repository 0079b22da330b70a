"""The payload store: one content-addressed mechanism for large payloads and snapshots."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import PayloadIntegrityError, PayloadMissingError
from agentsteps.storage import payload_store
from agentsteps.storage.payload_store import (
    LocalDirStorageDriver,
    PayloadStore,
    build_payload_store,
)

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`


async def test_bytes_round_trip_under_their_sha256(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path))
    claim = await store.put(b"snapshot bytes")
    assert claim["hash_algorithm"] == "sha256"
    stored = store.driver.path_for(claim["hash_value"])
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == claim["hash_value"]
    assert await store.get(claim) == b"snapshot bytes"


async def test_altered_bytes_are_detected(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path))
    claim = await store.put(b"original")
    store.driver.path_for(claim["hash_value"]).write_bytes(b"changed")
    with pytest.raises(PayloadIntegrityError):
        await store.get(claim)


async def test_small_payloads_are_read_on_the_event_loop_and_failures_stay_typed(tmp_path, monkeypatch):
    """A snapshot is read by every code.resume: a few KiB skip the thread hop; large, missing,
    altered or malformed claims still go through the thread and fail with the same typed errors."""
    store = PayloadStore(LocalDirStorageDriver(tmp_path))
    small = await store.put(b"snapshot bytes")
    large = await store.put(b"x" * (128 * 1024))
    altered = await store.put(b"original")
    store.driver.path_for(altered["hash_value"]).write_bytes(b"changed")
    hops: list[str] = []
    real_to_thread = asyncio.to_thread

    async def counted(fn, *args, **kwargs):
        hops.append(fn.__name__)
        return await real_to_thread(fn, *args, **kwargs)

    monkeypatch.setattr(payload_store.asyncio, "to_thread", counted)
    assert await store.get(small) == b"snapshot bytes"
    assert hops == []
    assert await store.get(large) == b"x" * (128 * 1024)
    assert hops == ["_retrieve_all"]
    with pytest.raises(PayloadIntegrityError):
        await store.get(altered)  # small and present: read inline, and still checked
    with pytest.raises(PayloadMissingError):
        await store.get({"hash_algorithm": "sha256", "hash_value": "0" * 64})
    with pytest.raises(PayloadIntegrityError):
        await store.get({"hash_algorithm": "sha256", "hash_value": "../../etc/passwd"})


async def test_data_converter_offloads_payloads_over_256_kib(tmp_path):
    settings = WorkerSettings(state_dir=tmp_path)
    store = build_payload_store(settings)
    converter = store.data_converter()  # what the worker's build_data_converter(settings, store) returns
    small, big = {"n": 1}, {"rows": ["x" * 1000] * 400}
    [small_payload, big_payload] = await converter.encode([small, big])
    assert small_payload.data and b"rows" not in big_payload.data
    assert big_payload.ByteSize() < 1024
    assert list((tmp_path / "payloads" / "sha256").rglob("*")), "the big payload is in the local store"
    assert await converter.decode([small_payload, big_payload], [dict, dict]) == [small, big]


def test_s3_is_used_when_a_bucket_is_configured(tmp_path):
    store = build_payload_store(WorkerSettings(state_dir=tmp_path, payload_store={"s3_bucket": "payloads"}))
    assert store.driver.type() == "aws.s3driver"
    assert store.external_storage().payload_size_threshold == 256 * 1024
