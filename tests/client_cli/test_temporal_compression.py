"""The engine's connection to Temporal sends its messages uncompressed unless the operator asks for gzip.

The Temporal SDK gzips every request and response by default. The engine's
payloads are small (conversations and large results go by reference), so
gzip only spent CPU on the worker and the server (docs/benchmarks.md, "The
connection to Temporal without gzip").
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.service import GrpcCompression

from agentsteps.client.settings import load_settings
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import InvalidSpecError
from agentsteps.worker import connect


@pytest.mark.parametrize(
    "setting, expected",
    [
        (None, GrpcCompression.NONE),
        ("none", GrpcCompression.NONE),
        ("gzip", GrpcCompression.GZIP),
    ],
)
async def test_the_engine_connects_with_the_compression_the_settings_name(temporal_env, tmp_path, setting, expected):
    settings = WorkerSettings(state_dir=tmp_path, **({"temporal_grpc_compression": setting} if setting else {}))
    client = await connect(settings, temporal_env.client.service_client.config.target_host)
    assert client.service_client.config.grpc_compression is expected
    # The server answers on that connection: a workflow list needs a round trip.
    workflow_id = f"missing-{uuid.uuid4().hex[:8]}"
    assert [w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")] == []


@pytest.mark.parametrize("value", ['"brotli"', '"GZIP"', "true", "1"])
def test_an_unknown_compression_is_a_config_error_naming_the_key(tmp_path: Path, value: str):
    config = tmp_path / "agentsteps.toml"
    config.write_text(f"[worker]\ntemporal_grpc_compression = {value}\n")
    with pytest.raises(InvalidSpecError) as caught:
        load_settings(config, env={})
    assert [v.path for v in caught.value.violations] == ["$.temporal_grpc_compression"]
