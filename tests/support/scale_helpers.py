"""Builders shared by the scale-out and server-restart tests: specs, scripts, worker processes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from process_support import start_worker_process

from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.spec import ActivityPolicy

SCRIPT = Path(__file__).with_name("scale_support.py")
KEY = "shared-snapshot-key-0123456789abcdef"
TOOL_CALLS = 3
PROGRAM_CALLS = 4


def tool_spec(delay: float) -> AgentSpec:
    return AgentSpec(
        name="scale-tools",
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=256, context_window=2_000_000),
        tools=["bulk_fetch"],
        max_steps=TOOL_CALLS + 2,
        token_budget=10_000_000,
        system_prompt=f"tool mode; delay {delay}",
        tool_policy=ActivityPolicy(start_to_close_seconds=delay + 4, initial_interval_seconds=0.5),
    )


def code_spec(delay: float) -> AgentSpec:
    return tool_spec(delay).model_copy(update={"name": "scale-code", "mode": "code"})


def program(delay: float) -> str:
    return (
        "total = 0\n"
        f"for i in range(1, {PROGRAM_CALLS + 1}):\n"
        f"    batch = await bulk_fetch(n=i, delay_seconds={delay})\n"
        "    total += len(batch['rows'])\n"
        "total\n"
    )


def script(delay: float) -> dict[str, Any]:
    """Code mode answers with the program; tool mode fetches batches 1..TOOL_CALLS, then answers."""

    def call(n: int) -> dict[str, Any]:
        return {"tool_calls": [{"name": "bulk_fetch", "arguments": {"n": n, "delay_seconds": delay}}]}

    rules: list[dict[str, Any]] = [
        {
            "match": {"role": "user", "any_contains": "async def bulk_fetch"},
            "reply": {"content": f"```python\n{program(delay)}```"},
        },
        {"match": {"role": "user"}, "reply": call(1)},
    ]
    for n in range(1, TOOL_CALLS):
        rules.append({"match": {"role": "tool", "regex": rf'"n":\s*{n}[,}}]'}, "reply": call(n + 1)})
    rules.append({"match": {"tool_result_for": "bulk_fetch"}, "reply": {"content": "done"}})
    return {"rules": rules}


def worker_settings(
    address: str,
    task_queue: str,
    base_url: str,
    state_dir: Path,
    *,
    s3: dict | None = None,
    key: str | None = KEY,
    single_worker: bool = False,
) -> str:
    data: dict[str, Any] = {
        "temporal_address": address,
        "task_queue": task_queue,
        "state_dir": str(state_dir),
        "providers": {"openai_base_url": base_url, "request_timeout_seconds": 30},
        "tool_factories": ["scale_support:build_registry"],
        "single_worker": single_worker,
        "sandbox_processes": 1,
    }
    if key is not None:
        data["snapshot_key"] = key
    if s3 is not None:
        data["payload_store"] = s3
    return json.dumps(data)


def spawn(
    settings_json: str,
    ledger: Path,
    *,
    snapshot_every: int | None = None,
    key_wait: float | None = None,
    env: dict[str, str] | None = None,
):
    env = {**(env or {}), "SCALE_SETTINGS": settings_json, "SCALE_LEDGER": str(ledger)}
    if snapshot_every is not None:
        env["SCALE_SNAPSHOT_EVERY"] = str(snapshot_every)
    if key_wait is not None:
        env["SCALE_KEY_WAIT"] = str(key_wait)
    return start_worker_process(SCRIPT, env=env)


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
