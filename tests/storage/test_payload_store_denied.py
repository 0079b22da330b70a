"""One pod with wrong S3 credentials fails only its own attempts; the run is left for a healthy pod.

A real S3 API (moto) with IAM authentication on: one worker has a valid key,
the other the right key id with the wrong secret (an operator's typo, a rotated
Secret not yet mounted). Both poll the same task queue.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import boto3
import pytest
from agent_support import MODEL, make_spec
from fleet_support import sample
from moto import settings as moto_settings
from moto.server import ThreadedMotoServer
from process_support import wait_for
from s3_support import store_settings
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.client import Client

from agentsteps.contracts import AgentInput, AgentResult, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.storage.payload_store import build_payload_store
from agentsteps.worker import running_worker

REGION = "us-east-1"


@pytest.fixture
def authed_s3():
    """(endpoint, bucket, access key id, secret): moto checking every request's signature and policy."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"

    def client(service: str, key: str, secret: str):
        return boto3.client(
            service, endpoint_url=endpoint, region_name=REGION, aws_access_key_id=key, aws_secret_access_key=secret
        )

    iam = client("iam", "bootstrap", "bootstrap")
    user = f"worker-{uuid.uuid4().hex[:8]}"  # moto keeps IAM users per process, across its servers
    iam.create_user(UserName=user)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    iam.put_user_policy(
        UserName=user,
        PolicyName="payloads",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        ),
    )
    bucket = f"denied-{uuid.uuid4().hex[:10]}"
    client("s3", key["AccessKeyId"], key["SecretAccessKey"]).create_bucket(Bucket=bucket)
    before = moto_settings.INITIAL_NO_AUTH_ACTION_COUNT
    moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # from here on, every request is authenticated
    try:
        yield endpoint, bucket, key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = before
        server.stop()


def _settings(tmp_path, scripted, queue: str, endpoint: str, bucket: str, key: str, secret: str) -> WorkerSettings:
    store = {**store_settings(endpoint, bucket), "s3_access_key_id": key, "s3_secret_access_key": secret}
    return WorkerSettings(
        state_dir=tmp_path,
        task_queue=queue,
        payload_store=store,
        providers=ProviderSettings(openai_base_url=scripted.url_openai, request_timeout_seconds=5),
    )


def _denied() -> float:
    return sample("agentsteps_payload_store_denied_total") or 0.0


async def test_a_pod_denied_by_s3_fails_its_attempts_and_a_healthy_pod_completes_the_run(
    temporal_env, scripted, tmp_path, authed_s3
):
    endpoint, bucket, key, secret = authed_s3
    queue = f"denied-{uuid.uuid4().hex[:8]}"
    good = _settings(tmp_path / "good", scripted, queue, endpoint, bucket, key, secret)
    bad = _settings(tmp_path / "bad", scripted, queue, endpoint, bucket, key, "not-the-secret")
    scripted.set_script({"replies": [{"content": "read it all"}]})
    store = build_payload_store(good)
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host, data_converter=store.data_converter()
    )
    # The input is over the inline limit: it lives in S3, and every worker reads it from there.
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(
            spec=make_spec(tools=[], model=LLMConfig(model=MODEL, max_tokens=256, context_window=1_000_000)),
            input="x" * 300_000,
        ),
        id=f"denied-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        result_type=AgentResult,
        # The bad pod reports only its first failed workflow task; the SDK lets later attempts time out, and each
        # goes to whichever pod polls next: 5 s apart here instead of the default 10 s.
        task_timeout=timedelta(seconds=5),
    )
    address = temporal_env.client.service_client.config.target_host
    bad_client = await Client.connect(address, data_converter=build_payload_store(bad).data_converter())
    good_client = await Client.connect(address, data_converter=build_payload_store(good).data_converter())
    denied_before = _denied()
    try:
        async with running_worker(bad_client, bad):
            await wait_for(lambda: _denied() > denied_before, timeout=60)
            await asyncio.sleep(3)  # past the reaper's grace: a pod that would terminate has done so
            status = (await handle.describe()).raw_description.workflow_execution_info.status
            assert status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING, "the bad pod ended the run"
            assert not scripted.requests, "the bad pod ran the model without its input"
            # The healthy pod joins while the bad one still polls.
            async with running_worker(good_client, good):
                result = await asyncio.wait_for(handle.result(), timeout=120)
    finally:
        await store.aclose()
    assert result.status == "completed" and result.output == "read it all"
    history = await handle.fetch_history()
    assert not any(e.HasField("workflow_execution_terminated_event_attributes") for e in history.events)
