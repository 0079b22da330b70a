"""Snapshot keys rotate: signatures carry a key id, and configured previous keys still verify."""

from __future__ import annotations

import pytest

from agentsteps.activities.sandbox.snapshots import SnapshotVault, key_id, previous_snapshot_keys
from agentsteps.client.settings import load_settings
from agentsteps.contracts.errors import SnapshotIntegrityError, SnapshotKeyUnknownError
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

OLD = b"old-key-0123456789abcdef"
NEW = b"new-key-0123456789abcdef"


@pytest.fixture
def store(tmp_path) -> PayloadStore:
    return PayloadStore(LocalDirStorageDriver(tmp_path))


async def test_a_snapshot_signed_with_the_previous_key_loads_after_rotation(store):
    ref = await SnapshotVault(store, OLD).save("run-1", b"paused program")
    assert ref.key_id == key_id(OLD) and key_id(OLD) != key_id(NEW)
    assert OLD.hex() not in ref.model_dump_json() and OLD.decode() not in ref.model_dump_json()
    rotated = SnapshotVault(store, NEW, [OLD])
    assert await rotated.load("run-1", ref) == b"paused program"
    # New snapshots are signed with the new key only.
    fresh = await rotated.save("run-1", b"next segment")
    assert fresh.key_id == key_id(NEW)
    assert await SnapshotVault(store, NEW).load("run-1", fresh) == b"next segment"


async def test_a_key_id_this_worker_lacks_is_a_retryable_key_unknown_error_naming_it(store):
    ref = await SnapshotVault(store, OLD).save("run-1", b"paused program")
    with pytest.raises(SnapshotKeyUnknownError, match=key_id(OLD)) as raised:
        await SnapshotVault(store, NEW).load("run-1", ref)
    assert raised.value.retryable and not isinstance(raised.value, SnapshotIntegrityError)


async def test_a_snapshot_from_before_key_ids_is_checked_against_every_configured_key(store):
    ref = await SnapshotVault(store, OLD).save("run-1", b"paused program")
    legacy = ref.model_copy(update={"key_id": None})
    assert await SnapshotVault(store, NEW, [OLD]).load("run-1", legacy) == b"paused program"
    with pytest.raises(SnapshotIntegrityError):
        await SnapshotVault(store, NEW).load("run-1", legacy)


async def test_a_forged_key_id_does_not_help_a_signature_from_another_key(store):
    ref = await SnapshotVault(store, b"attacker-key-0123456789").save("run-1", b"evil")
    forged = ref.model_copy(update={"key_id": key_id(NEW)})
    with pytest.raises(SnapshotIntegrityError):
        await SnapshotVault(store, NEW, [OLD]).load("run-1", forged)


def test_previous_keys_come_from_a_comma_separated_variable(tmp_path):
    env = {
        "AGENTSTEPS_SNAPSHOT_KEY": NEW.decode(),
        "AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS": f"{OLD.decode()}, other-key-0123456789",
    }
    settings = load_settings(None, env)
    assert previous_snapshot_keys(settings) == [OLD, b"other-key-0123456789"]
    assert OLD.decode() not in repr(settings)


def test_a_short_previous_key_is_refused(store):
    with pytest.raises(ValueError, match="at least 16 bytes"):
        SnapshotVault(store, NEW, [b"short"])


async def test_a_snapshot_an_older_build_signed_over_the_run_id_still_loads_through_the_legacy_key(store):
    # Before issue 22 a program's snapshots were signed over workflow id / run id / step; now over the
    # chain (workflow id / first run id / step). A program paused by an older build still resumes.
    ref = await SnapshotVault(store, NEW).save("wf/run-2/t3.0", b"paused program")
    vault = SnapshotVault(store, NEW)
    assert await vault.load("wf/run-1/t3.0", ref, "wf/run-2/t3.0") == b"paused program"
    with pytest.raises(SnapshotIntegrityError):
        await vault.load("wf/run-1/t3.0", ref)
    with pytest.raises(SnapshotIntegrityError):  # another run's legacy key vouches for nothing
        await vault.load("wf/run-1/t3.0", ref, "wf/run-3/t3.0")
