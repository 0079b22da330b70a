"""S3 payload storage through temporalio's S3 driver, against a real S3 API on loopback (moto)."""

from __future__ import annotations

import pytest
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures
from temporalio.exceptions import ApplicationError

from agentsteps.client.settings import load_settings
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import PayloadMissingError
from agentsteps.storage.payload_store import build_payload_store
from agentsteps.worker import build_data_converter

BIG = {"rows": ["x" * 1000] * 400}


def s3_settings(tmp_path, endpoint, bucket, prefix="agentsteps/") -> WorkerSettings:
    return WorkerSettings(state_dir=tmp_path, payload_store=store_settings(endpoint, bucket, prefix))


async def test_large_payloads_round_trip_through_s3_under_the_prefix(tmp_path, s3_endpoint, s3_bucket):
    settings = s3_settings(tmp_path, s3_endpoint, s3_bucket, "team-a/")
    store = build_payload_store(settings)
    converter = store.data_converter()
    [ref] = await converter.encode([BIG])
    assert b"rows" not in ref.data and ref.ByteSize() < 2048
    keys = [o["Key"] for o in s3_client(s3_endpoint).list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert len(keys) == 1 and keys[0].startswith("team-a/v0/") and "/d/sha256/" in keys[0]
    assert not (tmp_path / "payloads").exists(), "nothing lands in the local directory"
    # Another worker (another process, same settings) reads it back.
    assert await build_data_converter(settings).decode([ref], [dict]) == [BIG]
    blob_claim = await store.put(b"snapshot bytes")
    assert await build_payload_store(settings).get(blob_claim) == b"snapshot bytes"
    await store.aclose()


async def test_a_payload_deleted_from_s3_decodes_to_a_typed_non_retryable_failure(tmp_path, s3_endpoint, s3_bucket):
    settings = s3_settings(tmp_path, s3_endpoint, s3_bucket)
    [ref] = await build_data_converter(settings).encode([BIG])
    s3 = s3_client(s3_endpoint)
    [key] = [o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket)["Contents"]]
    s3.delete_object(Bucket=s3_bucket, Key=key)
    with pytest.raises(ApplicationError) as caught:
        await build_data_converter(settings).decode([ref], [dict])
    digest = key.rsplit("/", 1)[-1]
    assert caught.value.type == "PayloadMissingError" and caught.value.non_retryable
    assert digest in caught.value.message and f"s3://{s3_bucket}/agentsteps/" in caught.value.message


async def test_a_missing_bucket_is_a_typed_failure_naming_digest_and_store(tmp_path, s3_endpoint, s3_bucket):
    [ref] = await build_data_converter(s3_settings(tmp_path, s3_endpoint, s3_bucket)).encode([BIG])
    s3 = s3_client(s3_endpoint)
    for obj in s3.list_objects_v2(Bucket=s3_bucket)["Contents"]:
        s3.delete_object(Bucket=s3_bucket, Key=obj["Key"])
    s3.delete_bucket(Bucket=s3_bucket)
    with pytest.raises(ApplicationError) as caught:
        await build_data_converter(s3_settings(tmp_path, s3_endpoint, s3_bucket)).decode([ref], [dict])
    assert caught.value.type == "PayloadMissingError" and "NoSuchBucket" in caught.value.message


async def test_raw_blobs_missing_from_s3_raise_payload_missing(tmp_path, s3_endpoint, s3_bucket):
    store = build_payload_store(s3_settings(tmp_path, s3_endpoint, s3_bucket))
    claim = await store.put(b"bytes")
    s3_client(s3_endpoint).delete_object(Bucket=s3_bucket, Key="agentsteps/" + claim["key"])
    with pytest.raises(PayloadMissingError, match=claim["hash_value"]):
        await store.get(claim)


async def test_a_reference_from_a_worker_with_a_local_store_fails_typed_on_an_s3_worker(
    tmp_path, s3_endpoint, s3_bucket
):
    [ref] = await build_data_converter(WorkerSettings(state_dir=tmp_path / "other")).encode([BIG])
    with pytest.raises(ApplicationError) as caught:
        await build_data_converter(s3_settings(tmp_path, s3_endpoint, s3_bucket)).decode([ref], [dict])
    assert caught.value.type == "PayloadMissingError" and "agentsteps.localdir" in caught.value.message


async def test_a_local_store_without_the_payload_fails_typed(tmp_path):
    [ref] = await build_data_converter(WorkerSettings(state_dir=tmp_path / "a")).encode([BIG])
    with pytest.raises(ApplicationError) as caught:
        await build_data_converter(WorkerSettings(state_dir=tmp_path / "b")).decode([ref], [dict])
    assert caught.value.type == "PayloadMissingError" and str(tmp_path / "b" / "payloads") in caught.value.message


def test_s3_settings_come_from_the_usual_aws_variables_and_the_config_file(tmp_path):
    config = tmp_path / "agentsteps.toml"
    config.write_text('[worker.payload_store]\ns3_bucket = "from-file"\ns3_prefix = "prod/"\ns3_region = "eu-west-1"\n')
    env = {
        "AWS_ENDPOINT_URL_S3": "http://minio:9000",
        "AWS_ACCESS_KEY_ID": "AKIA-TEST",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t-value",
        "AWS_REGION": "eu-central-1",
    }
    settings = load_settings(config, env)
    cfg = settings.payload_store
    assert (cfg.s3_bucket, cfg.s3_prefix, cfg.s3_region, cfg.s3_endpoint_url) == (
        "from-file",
        "prod/",
        "eu-central-1",
        "http://minio:9000",
    )
    assert cfg.s3_secret_access_key is not None and cfg.s3_secret_access_key.get_secret_value() == "s3cr3t-value"
    assert "s3cr3t-value" not in repr(settings) and "s3cr3t-value" not in build_payload_store(settings).location


def test_malformed_payload_store_settings_are_a_typed_config_error(tmp_path):
    from agentsteps.contracts import InvalidSpecError

    config = tmp_path / "agentsteps.toml"
    config.write_text('[worker.payload_store]\ns3_bucket = ["not", "a", "name"]\nthreshold_bytes = "big"\n')
    with pytest.raises(InvalidSpecError) as caught:
        load_settings(config, {})
    paths = {v.path for v in caught.value.violations}
    assert {"$.payload_store.s3_bucket", "$.payload_store.threshold_bytes"} <= paths


async def test_hostile_references_decode_to_typed_failures_not_stuck_tasks(tmp_path, s3_endpoint, s3_bucket):
    """Claims naming an unknown store, or missing their digest or key, as a tampered history would hold."""
    import json

    from temporalio.api.common.v1 import Payload

    def reference(driver: str, claim: dict) -> Payload:
        body = json.dumps({"driverName": driver, "claimData": claim}).encode()
        return Payload(
            metadata={"encoding": b"json/protobuf", "messageType": b"temporal.api.sdk.v1.ExternalStorageReference"},
            data=body,
        )

    cases = [
        (
            WorkerSettings(state_dir=tmp_path),
            reference("some.other.driver", {"hash_value": "0" * 64}),
            "PayloadMissingError",
        ),
        (
            WorkerSettings(state_dir=tmp_path),
            reference("agentsteps.localdir", {"hash_value": "../../etc/passwd"}),
            "PayloadIntegrityError",
        ),
        (
            s3_settings(tmp_path, s3_endpoint, s3_bucket),
            reference("aws.s3driver", {"hash_value": "0" * 64}),
            "PayloadIntegrityError",
        ),
    ]
    for settings, payload, expected in cases:
        with pytest.raises(ApplicationError) as caught:
            await build_data_converter(settings).decode([payload], [dict])
        assert caught.value.type == expected and caught.value.non_retryable, payload.data


async def test_a_segment_and_a_tool_catalog_stored_in_one_call_read_back_from_s3(tmp_path, s3_endpoint, s3_bucket):
    """``put_all``: a resolving call's conversation segment and tool catalog go in one store call."""
    from agentsteps.contracts.llm.tool_catalog import catalog_ref, decode_catalog, encode_catalog
    from agentsteps.contracts.llm.tools import ToolSchema

    settings = s3_settings(tmp_path, s3_endpoint, s3_bucket, "team-a/")
    store = build_payload_store(settings)
    tools = [ToolSchema(name="get_weather", description="Current weather for a city.")]
    catalog = encode_catalog(tools, "run-a/1")
    segment_claim, catalog_claim = await store.put_all([b"a segment", catalog])
    other = build_payload_store(settings)  # another worker
    assert await other.get(segment_claim) == b"a segment"
    assert decode_catalog(catalog_ref(catalog, 1, catalog_claim), await other.get(catalog_claim), "run-a/1") == tools
    await store.aclose()
    await other.aclose()
