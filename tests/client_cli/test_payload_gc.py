"""``agentsteps payloads gc``: only payloads no open workflow can still need, old enough, and only with --delete."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from agent_support import make_spec
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures
from temporalio.client import Client

from agentsteps.client.payload_gc import collect_garbage
from agentsteps.contracts import AgentInput
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import PayloadMissingError
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.storage.payload_store import build_payload_store

AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))
OLD = time.time() - 40 * 86400


async def _open_run_with_large_input(temporal_env, store, text: str) -> str:
    """A run nobody works on: open, and its history holds a reference to its large input."""
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host, data_converter=store.data_converter()
    )
    workflow_id = f"gc-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=make_spec(), input=text),
        id=workflow_id,
        task_queue=f"nobody-{uuid.uuid4().hex[:8]}",
    )
    return workflow_id


def _age(store_root: Path) -> None:
    for path in (store_root / "sha256").glob("??/*"):
        os.utime(path, (OLD, OLD))


async def test_gc_keeps_what_open_runs_reference_and_deletes_only_old_garbage_with_delete(temporal_env, tmp_path):
    settings = WorkerSettings(state_dir=tmp_path)
    store = build_payload_store(settings)
    root = tmp_path / "payloads"
    # A snapshot-like blob only a kept payload mentions (as a program status holds a snapshot ref).
    nested = await store.put(b"paused program" * 10)
    workflow_id = await _open_run_with_large_input(temporal_env, store, f"see {nested['hash_value']} " + "x" * 300_000)
    garbage_claim = await store.put(b"a closed run's tool result" * 20_000)
    _age(root)
    recent = await store.put(b"being written right now" * 20_000)

    report = await collect_garbage(temporal_env.client, store, timedelta(days=30))

    assert [o.digest for o in report.garbage] == [garbage_claim["hash_value"]]
    assert report.referenced == 2 and report.recent == 1 and report.open_workflows >= 1
    assert store.driver.path_for(garbage_claim["hash_value"]).exists(), "a dry run deletes nothing"

    # The command line, as an operator runs it: still a dry run without --delete.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSTEPS_", "AWS_", "TEMPORAL_"))}
    env.update(
        TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host, AGENTSTEPS_STATE_DIR=str(tmp_path)
    )
    dry = subprocess.run(
        [AGENTSTEPS, "payloads", "gc", "--older-than", "30d", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["garbage"] == [garbage_claim["hash_value"]]
    assert store.driver.path_for(garbage_claim["hash_value"]).exists()

    done = subprocess.run(
        [AGENTSTEPS, "payloads", "gc", "--older-than", "30d", "--delete"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "deleted 1 payloads" in done.stdout
    assert not store.driver.path_for(garbage_claim["hash_value"]).exists()
    for kept in (nested["hash_value"], recent["hash_value"]):
        assert store.driver.path_for(kept).exists()
    # The open run's input is still readable.
    handle = temporal_env.client.get_workflow_handle(workflow_id)
    await handle.terminate()


async def test_gc_on_s3_deletes_unreferenced_objects_and_keeps_referenced_ones(
    temporal_env, tmp_path, s3_endpoint, s3_bucket
):
    store = build_payload_store(
        WorkerSettings(state_dir=tmp_path, payload_store=store_settings(s3_endpoint, s3_bucket))
    )
    workflow_id = await _open_run_with_large_input(temporal_env, store, "y" * 300_000)
    garbage_claim = await store.put(b"closed" * 100_000)
    later = datetime.now(timezone.utc) + timedelta(days=31)

    report = await collect_garbage(temporal_env.client, store, timedelta(days=30), delete=True, now=later)

    assert [o.digest for o in report.garbage] == [garbage_claim["hash_value"]] and report.referenced == 1
    keys = [o["Key"] for o in s3_client(s3_endpoint).list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert len(keys) == 1 and garbage_claim["hash_value"] not in keys[0] and keys[0].startswith("agentsteps/")
    await store.aclose()
    await temporal_env.client.get_workflow_handle(workflow_id).terminate()


def test_gc_rejects_a_malformed_age_before_touching_anything(tmp_path):
    done = subprocess.run(
        [AGENTSTEPS, "payloads", "gc", "--older-than", "thirty days"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "not a duration" in done.stderr


async def test_a_reachable_payload_that_cannot_be_read_stops_gc_before_it_deletes_what_it_names(temporal_env, tmp_path):
    """A store error that outlasts the client's retries, on a kept payload: before, the walk skipped it as
    "gone", so what only it names (here a paused program's snapshot) looked unreachable and was deleted."""
    settings = WorkerSettings(state_dir=tmp_path)
    store = build_payload_store(settings)
    nested = await store.put(b"paused program" * 10)
    workflow_id = await _open_run_with_large_input(temporal_env, store, f"see {nested['hash_value']} " + "y" * 300_000)
    _age(tmp_path / "payloads")
    large = [o async for o in store.list_objects() if o.digest != nested["hash_value"]]
    assert len(large) == 1
    read = store.read_object

    async def unreadable(location: str) -> bytes:
        if location == large[0].location:
            raise OSError(5, "Input/output error")
        return await read(location)

    store.read_object = unreadable  # type: ignore[method-assign]
    try:
        with pytest.raises(PayloadMissingError, match=f"nothing deleted: sha256:{large[0].digest} is reachable"):
            await collect_garbage(temporal_env.client, store, timedelta(days=30), delete=True)
        assert store.driver.path_for(nested["hash_value"]).exists()
        store.read_object = read  # type: ignore[method-assign]
        report = await collect_garbage(temporal_env.client, store, timedelta(days=30), delete=True)
        assert report.garbage == [] and store.driver.path_for(nested["hash_value"]).exists()
    finally:
        await temporal_env.client.get_workflow_handle(workflow_id).terminate()
