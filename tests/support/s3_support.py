"""A real S3 HTTP API on loopback: moto's threaded server, started once per test session."""

from __future__ import annotations

import uuid

import boto3
import pytest
from moto.server import ThreadedMotoServer

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret", "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def s3_client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=CREDENTIALS["AWS_REGION"],
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture
def s3_bucket(s3_endpoint) -> str:
    name = f"payloads-{uuid.uuid4().hex[:10]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


def store_settings(endpoint: str, bucket: str, prefix: str = "agentsteps/") -> dict:
    """``payload_store`` settings for the loopback server, as the config file would give them."""
    return {
        "s3_bucket": bucket,
        "s3_prefix": prefix,
        "s3_endpoint_url": endpoint,
        "s3_region": CREDENTIALS["AWS_REGION"],
        "s3_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "s3_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }
