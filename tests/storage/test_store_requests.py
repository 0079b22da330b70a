"""Every request the payload store makes reaches the worker's counters, as S3 would bill it."""

from __future__ import annotations

import asyncio

import pytest

from agentsteps.storage import store_requests
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore
from agentsteps.telemetry.metrics import PAYLOAD_STORE_BYTES, PAYLOAD_STORE_REQUESTS, count_store_request

pytestmark = pytest.mark.fast


def test_a_new_object_is_a_put_of_its_bytes_a_second_store_a_reference_and_a_read_a_get(tmp_path):
    heard: list[tuple[str, int]] = []
    store_requests.on_request.append(lambda op, size: heard.append((op, size)))
    try:
        store = PayloadStore(LocalDirStorageDriver(tmp_path))
        claim = asyncio.run(store.put(b"a conversation segment"))
        asyncio.run(store.put(b"a conversation segment"))
        data = asyncio.run(store.get(claim))
    finally:
        store_requests.on_request.pop()
    stored = len((tmp_path / "sha256" / claim["hash_value"][:2] / claim["hash_value"]).read_bytes())
    assert heard == [("put", stored), ("reference", 0), ("get", stored)]
    assert data == b"a conversation segment"


def test_the_worker_counts_requests_by_op_and_bytes_only_for_puts_and_gets():
    def sample(counter, op: str) -> float:
        return counter.labels(op)._value.get()

    before = {op: sample(PAYLOAD_STORE_REQUESTS, op) for op in ("put", "reference", "list")}
    put_bytes = sample(PAYLOAD_STORE_BYTES, "put")
    count_store_request("put", 640)
    count_store_request("reference", 0)
    count_store_request("list", 0)
    assert {op: sample(PAYLOAD_STORE_REQUESTS, op) - before[op] for op in before} == {
        "put": 1,
        "reference": 1,
        "list": 1,
    }
    assert sample(PAYLOAD_STORE_BYTES, "put") - put_bytes == 640
