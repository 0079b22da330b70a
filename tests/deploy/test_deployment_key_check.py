"""A worker whose snapshot key is not the deployment's is refused at start, before it polls.

The key check lives in the shared store (S3 through moto, as in production):
the first worker records its key id, signed with the key; the others compare.
"""

from __future__ import annotations

import uuid

import pytest
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures

from agentsteps.activities.sandbox.key_check import CHECK_NAME
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import DeploymentConfigError
from agentsteps.storage.payload_store import build_payload_store
from agentsteps.worker import check_snapshot_key

OLD = "deployment-key-old-0123456789abcdef"
NEW = "deployment-key-new-0123456789abcdef"


def _worker(tmp_path, endpoint: str, bucket: str, key: str, previous: list[str] = ()) -> WorkerSettings:
    return WorkerSettings(
        temporal_address="temporal.example:7233",
        state_dir=tmp_path / uuid.uuid4().hex[:6],
        payload_store=store_settings(endpoint, bucket),
        snapshot_key=key,
        snapshot_previous_keys=list(previous),
    )


async def test_a_worker_with_another_key_is_refused_and_a_rotation_moves_the_deployment_on(
    tmp_path, s3_endpoint, s3_bucket
):
    first = _worker(tmp_path, s3_endpoint, s3_bucket, OLD)
    await check_snapshot_key(first)  # the first worker records the deployment's key id
    await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, OLD))  # a second with the same key starts
    record = (
        s3_client(s3_endpoint).get_object(Bucket=s3_bucket, Key=f"agentsteps/deployment/{CHECK_NAME}")["Body"].read()
    )
    assert OLD.encode() not in record, "the check holds a key id and a MAC, never the key"

    with pytest.raises(DeploymentConfigError, match="does not match the deployment") as refused:
        await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, NEW))
    assert NEW not in str(refused.value) and OLD not in str(refused.value)

    # A rotation: the new key, the old one kept as previous. It starts, and the deployment's key is now NEW.
    await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, NEW, [OLD]))
    await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, NEW))
    with pytest.raises(DeploymentConfigError, match="does not match the deployment"):
        await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, OLD))


async def test_a_forged_or_garbled_key_check_refuses_instead_of_trusting_it(tmp_path, s3_endpoint, s3_bucket):
    await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, OLD))
    store = build_payload_store(_worker(tmp_path, s3_endpoint, s3_bucket, OLD))
    try:
        record = (await store.read_named(CHECK_NAME)).replace(b'"mac": "', b'"mac": "00')
        await store.write_named(CHECK_NAME, record)
        with pytest.raises(DeploymentConfigError):
            await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, OLD))
        await store.write_named(CHECK_NAME, b"\x00not json")
        with pytest.raises(DeploymentConfigError, match="unreadable"):
            await check_snapshot_key(_worker(tmp_path, s3_endpoint, s3_bucket, OLD))
    finally:
        await store.aclose()


async def test_the_embedded_single_worker_needs_no_check(tmp_path):
    await check_snapshot_key(WorkerSettings(state_dir=tmp_path))
    assert not (tmp_path / "payloads" / "deployment").exists()
