"""What token streaming costs and gives: one session with ``stream_tokens`` against one without.

Both sessions run interleaved on one dev server and one worker against the
scripted model, whose every answer is ~1,200 characters sent as 4-character
deltas over ~1.5 s (the pace of a real model). Per turn it reports the
workflow-history events and bytes the turn adds, the turn's wall time, and
when the first text of the answer reaches a follower of the progress stream
(streaming: while the model writes; without: only with the answer, at the
turn's end). Token batches are signals, so streaming adds history per batch
(about every 100 ms of the answer), never per token. Medians over the turns; the last line is one JSON object.

    .venv/bin/python bench/token_stream.py [--turns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.testing import WorkflowEnvironment

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.client.sessions import send_turn
from agentsteps.contracts import AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.names import PROGRESS_TOPIC
from agentsteps.contracts.session import ProgressEvent, SessionConfig
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.worker import running_worker

ANSWER = ("The refund for order A-17 was approved and sent; the customer will see it within three days. " * 13)[:1200]
# The same model pace both ways: 300 deltas 5 ms apart when streamed, the whole answer after 1.5 s when not.
SCRIPT = {
    "rules": [{"match": {"contains": "plain"}, "reply": {"content": ANSWER, "delay_seconds": 1.5}}],
    "default": {"content": ANSWER, "stream": {"chunk_chars": 4, "delay_seconds": 0.005}},
}
SPEC = AgentSpec(
    name="bench",
    model=LLMConfig(model="scripted-2026-01-01", max_tokens=2048, context_window=10**7),
    tools=[],
    max_steps=2,
    token_budget=10**9,
)


async def history(client: Client, sid: str) -> tuple[int, int]:
    events = (await client.get_workflow_handle(sid).fetch_history()).events
    return len(events), sum(e.ByteSize() for e in events)


async def first_text(client: Client, sid: str, offset: int, started: float) -> float:
    """Seconds from the turn's start until the answer's first text is on the progress stream."""
    stream = WorkflowStreamClient.create(client, sid)
    async for item in stream.subscribe(
        [PROGRESS_TOPIC], from_offset=offset, result_type=ProgressEvent, poll_cooldown=timedelta(milliseconds=10)
    ):
        event: ProgressEvent = item.data
        if event.kind == "token" or (event.kind == "turn_ended" and event.detail):
            return time.perf_counter() - started
    raise RuntimeError("the stream ended without the answer")


async def one_turn(client: Client, sid: str, queue: str, config: SessionConfig, n: int) -> dict[str, float]:
    events0, bytes0 = await history(client, sid)
    offset = await WorkflowStreamClient.create(client, sid).get_offset()
    started = time.perf_counter()
    seen = asyncio.ensure_future(first_text(client, sid, offset, started))
    result = await send_turn(
        client, SPEC, f"{sid.split('-')[1]} turn {n}", session_id=sid, task_queue=queue, config=config
    )
    wall = time.perf_counter() - started
    assert result.output == ANSWER
    first = await asyncio.wait_for(seen, 10)
    events1, bytes1 = await history(client, sid)
    return {"events": events1 - events0, "bytes": bytes1 - bytes0, "turn_s": wall, "first_text_s": first}


async def main(turns: int) -> dict:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
        data_converter=pydantic_data_converter,
    )
    try:
        with tempfile.TemporaryDirectory() as state, ScriptedModelServer(SCRIPT) as scripted:
            settings = WorkerSettings(
                state_dir=Path(state),
                task_queue=f"bench-{uuid.uuid4().hex[:6]}",
                providers=ProviderSettings(openai_base_url=scripted.url_openai),
            )
            modes = {"streamed": SessionConfig(stream_tokens=True), "plain": SessionConfig()}
            ids = {mode: f"bench-{mode}-{uuid.uuid4().hex[:6]}" for mode in modes}
            rows: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
            async with running_worker(env.client, settings):
                for mode, config in modes.items():  # warm up: both sessions exist
                    await send_turn(
                        env.client,
                        SPEC,
                        f"{mode} hello",
                        session_id=ids[mode],
                        task_queue=settings.task_queue,
                        config=config,
                    )
                for n in range(1, turns + 1):
                    for mode, config in modes.items():
                        rows[mode].append(await one_turn(env.client, ids[mode], settings.task_queue, config, n))
    finally:
        await env.shutdown()
    med = {mode: {k: statistics.median(r[k] for r in rows[mode]) for k in rows[mode][0]} for mode in rows}
    print(f"{'per turn (median)':<26}{'streamed':>12}{'plain':>12}{'ratio':>8}")
    for key, label in [
        ("events", "history events"),
        ("bytes", "history bytes"),
        ("turn_s", "turn wall time, s"),
        ("first_text_s", "first text seen, s"),
    ]:
        s, p = med["streamed"][key], med["plain"][key]
        print(f"{label:<26}{s:>12.3f}{p:>12.3f}{s / p:>8.2f}")
    return {
        "streamed": med["streamed"],
        "plain": med["plain"],
        "history_bytes_ratio": med["streamed"]["bytes"] / med["plain"]["bytes"],
        "first_text_ratio": med["streamed"]["first_text_s"] / med["plain"]["first_text_s"],
        "answer_chars": len(ANSWER),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10)
    summary = asyncio.run(main(parser.parse_args().turns))
    print(json.dumps(summary), flush=True)
    sys.stdout.flush()
