"""A worker whose payload store refuses (or cannot serve) its start-up check stops on one line naming the
cause and the next step: a ``DeploymentConfigError``, never a raw botocore line (real S3 API: moto)."""

from __future__ import annotations

import uuid

import pytest
from s3_support import s3_endpoint, store_settings  # noqa: F401 - fixture
from test_payload_store_denied import authed_s3  # noqa: F401 - fixture

from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import DeploymentConfigError
from agentsteps.worker import check_snapshot_key

KEY = "deployment-key-0123456789abcdef0123"


def cluster_worker(tmp_path, store: dict) -> WorkerSettings:
    return WorkerSettings(
        temporal_address="temporal.example:7233", state_dir=tmp_path, payload_store=store, snapshot_key=KEY
    )


async def test_a_store_that_refuses_the_worker_is_one_line_naming_the_credentials(tmp_path, authed_s3):
    endpoint, bucket, key_id, _ = authed_s3
    store = {**store_settings(endpoint, bucket), "s3_access_key_id": key_id, "s3_secret_access_key": "typo-s3cr3t-7f"}
    with pytest.raises(DeploymentConfigError) as refused:
        await check_snapshot_key(cluster_worker(tmp_path, store))
    line = str(refused.value)
    assert "\n" not in line and "refused this worker's start-up check" in line
    assert "AWS_SECRET_ACCESS_KEY" in line and "start it again" in line and "typo-s3cr3t-7f" not in line


async def test_a_missing_bucket_is_one_line_naming_the_bucket_to_check(tmp_path, s3_endpoint):
    store = store_settings(s3_endpoint, f"never-made-{uuid.uuid4().hex[:8]}")
    with pytest.raises(DeploymentConfigError) as refused:
        await check_snapshot_key(cluster_worker(tmp_path, store))
    line = str(refused.value)
    assert "\n" not in line and "could not be used" in line and "check the bucket" in line
    assert "NoSuchBucket" in line
