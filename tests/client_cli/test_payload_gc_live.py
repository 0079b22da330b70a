"""``payloads gc --delete`` never takes what a live session needs, on the local store and on S3 (moto).

Storage is content-addressed: a new session whose first segment equals an old
one's (same system prompt, same greeting) re-uses the old object. gc runs while
that session's turn is in flight, when its history does not mention the segment
yet; the session's next turn must still read its whole conversation.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from agent_support import make_spec
from process_support import wait_for
from s3_support import s3_bucket, s3_client, s3_endpoint, store_settings  # noqa: F401 - fixtures
from temporalio.client import Client

from agentsteps.client.payload_gc import collect_garbage
from agentsteps.client.sessions import send_turn
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.storage.payload_store import PayloadStore, build_payload_store
from agentsteps.storage.s3_store import StoredObject
from agentsteps.worker import running_worker

AGE = timedelta(seconds=2)
"""``--older-than`` for these tests: objects from before the pause below are old enough to collect."""


@pytest.fixture(params=["local", "s3"])
def store_config(request, tmp_path) -> dict:
    if request.param == "local":
        return {}
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = f"gc-{uuid.uuid4().hex[:10]}"
    s3_client(endpoint).create_bucket(Bucket=bucket)
    return store_settings(endpoint, bucket)


async def _wait_past_age() -> None:
    await asyncio.sleep(AGE.total_seconds() + 1.5)  # S3 times are whole seconds


class StoreWrittenDuringGc(PayloadStore):
    """The store as gc sees it, while a new run stores ``blob`` (already there: an old run's) the
    moment gc has listed the store."""

    def __init__(self, inner: PayloadStore, blob: bytes) -> None:
        super().__init__(inner.driver, inner.threshold_bytes, inner.location)
        self.blob = blob

    async def list_objects(self) -> AsyncIterator[StoredObject]:
        listed = [o async for o in super().list_objects()]
        await self.put(self.blob)
        for o in listed:
            yield o


async def test_a_payload_re_referenced_while_gc_runs_is_never_deleted(temporal_env, tmp_path, store_config):
    settings = WorkerSettings(state_dir=tmp_path, payload_store=store_config)
    store = build_payload_store(settings)
    try:
        shared = b"system prompt and greeting, stored by a session long closed" * 50
        claim = await store.put(shared)
        garbage = await store.put(b"a closed run's result, referenced by nothing" * 50)
        await _wait_past_age()
        report = await collect_garbage(temporal_env.client, StoreWrittenDuringGc(store, shared), AGE, delete=True)
        assert [o.digest for o in report.garbage] == [garbage["hash_value"]]
        assert await store.get(claim) == shared, "the object a new run just stored again was deleted"
    finally:
        await store.aclose()


async def test_a_new_session_sharing_an_old_sessions_first_segment_survives_gc_delete(
    temporal_env, scripted, tmp_path, store_config
):
    settings = WorkerSettings(
        state_dir=tmp_path / "state",
        task_queue=f"gc-{uuid.uuid4().hex[:8]}",
        payload_store=store_config,
        providers={"openai_base_url": scripted.url_openai, "request_timeout_seconds": 30},
    )
    store = build_payload_store(settings)
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host, data_converter=store.data_converter()
    )
    spec = make_spec(tools=[], system_prompt="You are the support desk.")
    try:
        async with running_worker(client, settings):
            scripted.set_script({"replies": [{"content": "hello, how can I help?"}]})
            old = f"old-{uuid.uuid4().hex[:8]}"
            await send_turn(client, spec, "hi", session_id=old, task_queue=settings.task_queue)
            await client.get_workflow_handle(old).terminate("an old session, long gone")
            await _wait_past_age()

            # The new session's first turn stores the very same first segment, then waits on the model.
            scripted.set_script(
                {
                    "rules": [
                        {"match": {"contains": "second"}, "reply": {"content": "I remember you said hi"}},
                        # Held until gc is done (end_delays), the 20 s only a bound.
                        {"match": {"role": "user"}, "reply": {"content": "hello again", "delay_seconds": 20}},
                    ]
                }
            )
            sent = len(scripted.requests)
            new = f"new-{uuid.uuid4().hex[:8]}"
            first = asyncio.create_task(send_turn(client, spec, "hi", session_id=new, task_queue=settings.task_queue))
            await wait_for(lambda: len(scripted.requests) > sent, timeout=60)
            report = await collect_garbage(client, store, AGE, delete=True)
            assert not first.done(), "gc ran while the turn was in flight"
            scripted.end_delays()
            assert (await first).output == "hello again"
        # A fresh worker: nothing cached, the conversation is read back from the store.
        async with running_worker(client, settings):
            second = await send_turn(
                client, spec, "the second question", session_id=new, task_queue=settings.task_queue
            )
        assert second.status == "completed" and second.output == "I remember you said hi", second
        assert report.garbage or report.recent or report.referenced  # gc did look at the store
    finally:
        await store.aclose()
