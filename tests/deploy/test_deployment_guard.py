"""A worker on a cluster refuses to start without a shared store and key, unless declared single."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from agent_support import make_spec
from temporalio.client import WorkflowFailureError

from agentsteps.contracts import AgentInput
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import DeploymentConfigError
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import check_deployment

AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))
S3 = {"s3_bucket": "payloads", "s3_endpoint_url": "http://minio:9000"}
KEY = "shared-snapshot-key-0123456789abcdef"


def test_a_cluster_worker_without_store_and_key_names_both_and_how_to_set_them(tmp_path):
    with pytest.raises(DeploymentConfigError) as caught:
        check_deployment(WorkerSettings(temporal_address="temporal:7233", state_dir=tmp_path))
    message = str(caught.value)
    for needed in (
        "AGENTSTEPS_SNAPSHOT_KEY",
        "AGENTSTEPS_PAYLOAD_S3_BUCKET",
        "AGENTSTEPS_SINGLE_WORKER",
        "temporal:7233",
    ):
        assert needed in message


def test_each_missing_piece_is_named_alone(tmp_path):
    with pytest.raises(DeploymentConfigError) as no_store:
        check_deployment(WorkerSettings(temporal_address="t:7233", snapshot_key=KEY))
    assert "AGENTSTEPS_PAYLOAD_S3_BUCKET" in str(no_store.value) and "AGENTSTEPS_SNAPSHOT_KEY" not in str(
        no_store.value
    )
    with pytest.raises(DeploymentConfigError) as no_key:
        check_deployment(WorkerSettings(temporal_address="t:7233", payload_store=S3))
    assert "AGENTSTEPS_SNAPSHOT_KEY" in str(no_key.value) and "AGENTSTEPS_PAYLOAD_S3_BUCKET" not in str(no_key.value)


def test_shared_store_and_key_or_a_declared_single_worker_or_the_embedded_default_start(tmp_path):
    check_deployment(WorkerSettings(temporal_address="t:7233", snapshot_key=KEY, payload_store=S3))
    check_deployment(WorkerSettings(temporal_address="t:7233", single_worker=True))
    check_deployment(WorkerSettings(state_dir=tmp_path))


def _worker_env(tmp_path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSTEPS_", "AWS_", "TEMPORAL_"))}
    env.update(AGENTSTEPS_STATE_DIR=str(tmp_path / "state"), AGENTSTEPS_METRICS_PORT="0", **extra)
    return env


def test_agentsteps_worker_refuses_to_start_before_connecting(tmp_path):
    started = time.monotonic()
    done = subprocess.run(
        [AGENTSTEPS, "worker"],
        env=_worker_env(tmp_path, TEMPORAL_ADDRESS="127.0.0.1:1"),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stderr.count("error:") == 1 and "AGENTSTEPS_PAYLOAD_S3_BUCKET" in done.stderr
    assert time.monotonic() - started < 30, "refused at once, not after connection retries"


async def test_agentsteps_worker_offers_no_demo_tools_unless_configured(temporal_env, client, tmp_path):
    task_queue = f"prod-{uuid.uuid4().hex[:8]}"
    env = _worker_env(
        tmp_path,
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
        AGENTSTEPS_SINGLE_WORKER="1",
        AGENTSTEPS_TASK_QUEUE=task_queue,
    )
    proc = subprocess.Popen(
        [AGENTSTEPS, "worker"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert proc.stdout is not None and "worker on" in proc.stdout.readline()
        with pytest.raises(WorkflowFailureError) as caught:
            await client.execute_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=make_spec(tools=["get_weather"]), input="hi"),
                id=f"prod-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
        assert "get_weather" in str(caught.value.cause)
    finally:
        proc.kill()
        proc.wait()
