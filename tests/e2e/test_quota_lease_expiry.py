"""A worker SIGKILLed while its runs hold quota leases: the capacity comes back within the lease time."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from process_support import kill, start_worker_process
from quota_support import start_run, unique, with_quotas

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.quotas import read_account
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.worker import running_worker

WORKER = Path(__file__).parents[1] / "support" / "worker_process.py"
LEASE_SECONDS = 4.0
SPEC = AgentSpec(name="lease", model=LLMConfig(model="scripted-2026-01-01", max_tokens=20), tools=[], max_steps=2)


async def test_a_sigkilled_worker_holding_leases_leaks_no_capacity_past_the_lease_time(
    temporal_env, client, settings, scripted, tmp_path
):
    scripted.set_script({"default": {"content": "slow answer", "delay_seconds": 12}})
    quota = unique("lease")
    configured = with_quotas(
        settings,
        limits=[
            {
                "name": quota,
                "model": "scripted-*",
                "concurrent_requests": 2,
                "lease_seconds": LEASE_SECONDS,
            }
        ],
    )
    address = temporal_env.client.service_client.config.target_host
    doomed_queue = f"doomed-{uuid.uuid4().hex[:8]}"
    # This process keeps the account (and serves the run started after the kill); the child holds the leases.
    async with running_worker(client, configured, registry=ToolRegistry()):
        child = start_worker_process(
            WORKER,
            address,
            doomed_queue,
            scripted.url_openai,
            tmp_path / "child",
            env={"AGENTSTEPS_TEST_QUOTAS": configured.quotas.model_dump_json()},  # its runs' quotas are its own
        )
        held = []
        try:
            held = [await start_run(client, configured, SPEC, task_queue=doomed_queue) for _ in range(2)]
            # The child is a fresh interpreter importing the engine: on a loaded 2-core machine (the suite on
            # three processes) it took over 30 s to start polling once. Its two requests still arrive together
            # (both runs wait for it), well inside the model's 12 s delay that keeps the leases held.
            await _until(lambda: len(scripted.requests) == 2, timeout=180.0)
            assert (await read_account(client, "quota", quota)).concurrent == 2
            kill(child)
            killed_at = time.monotonic()
            assert (await read_account(client, "quota", quota)).concurrent == 2, "still held right after the kill"
            while (await read_account(client, "quota", quota)).concurrent:
                assert time.monotonic() - killed_at < LEASE_SECONDS + 5, "the killed worker's leases never expired"
                await asyncio.sleep(0.1)
            freed_after = time.monotonic() - killed_at
            scripted.set_script({"default": {"content": "served"}})
            after = await start_run(client, configured, SPEC)
            result = await asyncio.wait_for(after.result(), timeout=30)
        finally:
            kill(child)
            for handle in held:
                await handle.terminate("test over: its worker was killed")

    assert freed_after <= LEASE_SECONDS + 5
    assert result.status == "completed" and result.output == "served"


async def _until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
