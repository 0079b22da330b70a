"""gc's deletes go in batches (``delete_unchanged``): a LIST and a DeleteObjects a page on S3 (moto), one
thread a batch on the local store; each object's time is read again just before its delete; a location that
is not the store's own is refused before anything is deleted; a failed batch is tried again, then reported,
and nothing live or unlisted is touched."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime, timedelta, timezone

import pytest
from s3_fault_proxy import FaultingS3Proxy
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures

from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import PayloadIntegrityError
from agentsteps.storage import payload_store, s3_store, store_requests
from agentsteps.storage.payload_store import PayloadStore, build_payload_store
from agentsteps.storage.s3_store import StoredObject

OLD = time.time() - 40 * 86400


class RefusingDeletes(FaultingS3Proxy):
    """Forwards everything but DeleteObjects requests that name ``key`` (all of them, or the first ``times``),
    which it answers 403 itself: the store never sees them. (403: botocore does not retry it, so each refusal
    is one failed batch for the store layer to handle.)"""

    def __init__(self, upstream: str, key: str, times: int | None = None) -> None:
        super().__init__(upstream, rate=0.0)
        self.key, self.times, self.refused = key.encode(), times, 0

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        line = head.split(b"\r\n", 1)[0]
        if line.startswith(b"POST ") and b"?delete" in line and self.key in body:
            if self.times is None or self.refused < self.times:
                self.refused += 1
                xml = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
                return b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s" % (
                    len(xml),
                    xml,
                )
        return await super()._forward(head, body)


async def _s3_store(tmp_path, endpoint: str, bucket: str) -> PayloadStore:
    return build_payload_store(WorkerSettings(state_dir=tmp_path, payload_store=store_settings(endpoint, bucket)))


async def _fill(store: PayloadStore, count: int) -> list[StoredObject]:
    for i in range(count):
        await store.put(f"a closed session's segment {i}".encode() * 20)
    return sorted([o async for o in store.list_objects()], key=lambda o: o.location)


def _keys(endpoint: str, bucket: str) -> set[str]:
    return {o["Key"] for o in s3_client(endpoint).list_objects_v2(Bucket=bucket).get("Contents", [])}


@pytest.fixture
def small_pages(monkeypatch):
    monkeypatch.setattr(s3_store, "DELETE_BATCH", 3)
    monkeypatch.setattr(payload_store, "DELETE_BACKOFF_SECONDS", 0.01)


async def test_s3_deletes_a_page_with_one_list_and_one_delete_and_keeps_what_was_re_referenced(
    tmp_path, s3_endpoint, s3_bucket, small_pages
):
    store = await _s3_store(tmp_path, s3_endpoint, s3_bucket)
    heard: list[str] = []
    try:
        objects = await _fill(store, 7)
        await asyncio.sleep(1.2)  # S3 times are whole seconds
        cutoff = datetime.now(timezone.utc)
        await asyncio.sleep(1.2)
        again = await store.put(f"a closed session's segment {3}".encode() * 20)  # re-referenced: copied onto itself
        [live] = [o for o in objects if o.digest == again["hash_value"]]
        store_requests.on_request.append(lambda op, size: heard.append(op))
        try:
            done = await store.delete_unchanged(objects, cutoff)
        finally:
            store_requests.on_request.pop()
    finally:
        await store.aclose()
    assert sorted(o.location for o in done.deleted) == sorted(o.location for o in objects if o is not live)
    assert done.recent == [live] and not done.failed and not done.gone
    assert _keys(s3_endpoint, s3_bucket) == {live.location}
    # 7 keys at 3 a page: 3 pages, each one LIST and one DELETE (two requests an object before).
    assert heard.count("list") == 3 and heard.count("delete") == 3 and "head" not in heard


async def test_s3_refuses_keys_outside_its_prefix_or_shape_before_deleting_anything(tmp_path, s3_endpoint, s3_bucket):
    store = await _s3_store(tmp_path, s3_endpoint, s3_bucket)
    s3 = s3_client(s3_endpoint)
    digest = "ab" * 32
    foreign = [
        f"other-deployment/v0/ns/default/d/sha256/{digest}",  # another deployment's prefix in the same bucket
        "agentsteps/deployment/snapshot-key-id",  # the named objects beside the payloads
        f"agentsteps/v0/ns/default/d/sha256/{digest}/../../../../deployment/snapshot-key-id",
        f"agentsteps/v0/d/sha256/{digest.upper()}",
        "agentsteps/v0/d/sha256/" + "z" * 64,
        "",
    ]
    try:
        objects = await _fill(store, 2)
        for key in foreign:
            if key:
                s3.put_object(Bucket=s3_bucket, Key=key, Body=b"not gc's")
        later = datetime.now(timezone.utc) + timedelta(days=1)
        for key in foreign:
            hostile = StoredObject(key, digest, datetime(2020, 1, 1, tzinfo=timezone.utc), 1)
            with pytest.raises(PayloadIntegrityError, match="refusing to delete"):
                await store.delete_unchanged([*objects, hostile], later)
        assert {o.location for o in objects} | {k for k in foreign if k} == _keys(s3_endpoint, s3_bucket)
    finally:
        await store.aclose()


async def _delete_through_refusals(tmp_path, s3_endpoint, s3_bucket, **refusing):
    """Seven old objects, deleted through a proxy that refuses the page holding the fifth (``refusing``: how often)."""
    staging = await _s3_store(tmp_path, s3_endpoint, s3_bucket)
    objects = await _fill(staging, 7)
    await staging.aclose()
    proxy = RefusingDeletes(s3_endpoint, objects[4].location, **refusing)
    store = await _s3_store(tmp_path, await proxy.start(), s3_bucket)
    try:
        done = await store.delete_unchanged(objects, datetime.now(timezone.utc) + timedelta(days=1))
    finally:
        await store.aclose()
        await proxy.stop()
    return objects, proxy, done


async def test_s3_a_refused_batch_is_tried_again_with_a_fresh_last_look(tmp_path, s3_endpoint, s3_bucket, small_pages):
    objects, proxy, done = await _delete_through_refusals(tmp_path, s3_endpoint, s3_bucket, times=2)
    assert proxy.refused == 2, "refused twice, then the third try went through"
    assert len(done.deleted) == 7 and not done.failed and not _keys(s3_endpoint, s3_bucket)


async def test_s3_a_batch_refused_every_time_is_reported_kept_and_the_other_pages_still_go(
    tmp_path, s3_endpoint, s3_bucket, small_pages
):
    objects, proxy, done = await _delete_through_refusals(tmp_path, s3_endpoint, s3_bucket)
    failed = {o.location for o, _ in done.failed}
    assert objects[4].location in failed and all("AccessDenied" in why for _, why in done.failed)
    assert proxy.refused == payload_store.DELETE_TRIES
    # Only the refused page is left, whole; the pages before and after it are gone.
    assert _keys(s3_endpoint, s3_bucket) == failed and len(failed) < 7
    assert {o.location for o in done.deleted} == {o.location for o in objects} - failed


def _age(root) -> None:
    for path in (root / "sha256").glob("??/*"):
        os.utime(path, (OLD, OLD))


async def test_local_store_deletes_a_batch_in_one_go_and_keeps_a_touched_file_and_a_foreign_entry(tmp_path):
    store = PayloadStore(payload_store.LocalDirStorageDriver(tmp_path))
    objects = await _fill(store, 5)
    _age(tmp_path)
    cutoff = datetime.now(timezone.utc) - timedelta(hours=1)
    touched = objects[1]
    os.utime(touched.location)  # re-referenced after the listing: a writer stored it again
    odd = tmp_path / "sha256" / "cd" / ("cd" * 32)
    odd.mkdir(parents=True)  # not a file the store wrote: a directory under a digest's name
    stranger = StoredObject(str(odd), odd.name, datetime(2020, 1, 1, tzinfo=timezone.utc), 0)
    done = await store.delete_unchanged([*objects, stranger], cutoff)
    assert done.recent == [touched] and os.path.exists(touched.location)
    assert {o.location for o in done.deleted} == {o.location for o in objects} - {touched.location}
    assert [o for o, _ in done.failed] == [stranger] and odd.is_dir()
    again = await store.delete_unchanged(done.deleted, cutoff)
    assert len(again.gone) == 4 and not again.deleted


@pytest.mark.parametrize(
    "location",
    [
        "/etc/passwd",
        "{root}/sha256/ab/../../../outside/" + "ab" * 32,
        "{root}/sha256/cd/" + "ab" * 32,  # the digest's directory is its first two characters
        "{root}/sha256/ab/" + "AB" * 32,
        "{root}/sha256/ab/" + "ab" * 31,
        "{other}/sha256/ab/" + "ab" * 32,  # another store's directory
        "{root}/sha256/linked/" + "ab" * 32,
        "",
    ],
)
async def test_local_store_refuses_a_location_that_is_not_its_own_payload_file(tmp_path, location):
    root, other = tmp_path / "store", tmp_path / "elsewhere"
    store = PayloadStore(payload_store.LocalDirStorageDriver(root))
    objects = await _fill(store, 2)
    victim = other / "sha256" / "ab" / ("ab" * 32)
    victim.parent.mkdir(parents=True)
    victim.write_bytes(b"someone else's")
    (root / "sha256" / "linked").symlink_to(victim.parent)
    path = location.format(root=root, other=other)
    hostile = StoredObject(path, "ab" * 32, datetime(2020, 1, 1, tzinfo=timezone.utc), 1)
    with pytest.raises(PayloadIntegrityError, match="refusing to delete"):
        await store.delete_unchanged([*objects, hostile], datetime.now(timezone.utc) + timedelta(days=1))
    assert victim.exists() and all(os.path.exists(o.location) for o in objects), "nothing was deleted"


def test_a_symlinked_digest_directory_is_refused_even_under_the_right_name(tmp_path):
    root = tmp_path / "store"
    (root / "sha256").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "sha256" / "ab").symlink_to(outside)
    driver = payload_store.LocalDirStorageDriver(root)
    with pytest.raises(PayloadIntegrityError):
        driver.own_path(str(root / "sha256" / "ab" / ("ab" * 32)))
    assert driver.own_path(str(root / "sha256" / "cd" / ("cd" * 32))).name == "cd" * 32
