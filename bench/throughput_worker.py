"""One worker process for throughput.py: the agent worker and the bare worker, side by side.

    python bench/throughput_worker.py ADDRESS TASK_QUEUE OPENAI_BASE_URL STATE_DIR

Serves ``TASK_QUEUE`` (the engine, as ``agentsteps worker`` builds it: the
worker's own client, data converter and runtime) and ``TASK_QUEUE-bare``
(``BareAgentShape`` with no-op activities) and ``TASK_QUEUE-hand`` (the
hand-written loop, ``HandwrittenAgentLoop``), prints ``ready`` and runs until
it is terminated. The bare and hand-written workers have a client of their
own on the same runtime, with the converter a team would pick
(``pydantic_data_converter``): the engine's (payload store, kept context
bindings) is the engine's, not theirs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from bare_workflow import BareAgentShape, noop
from handwritten_workflow import HandwrittenActivities, HandwrittenAgentLoop
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.worker import QueueCheck, connect, running_worker, settle_heap


async def serve(address: str, task_queue: str, base_url: str, state_dir: str) -> None:
    settings = WorkerSettings(
        state_dir=Path(state_dir),
        task_queue=task_queue,
        providers=ProviderSettings(openai_base_url=base_url, request_timeout_seconds=60),
    )
    client = await connect(settings, address)
    plain = await Client.connect(
        address,
        namespace=settings.namespace,
        data_converter=pydantic_data_converter,
        runtime=client.service_client.config.runtime,
    )
    bare = Worker(plain, task_queue=f"{task_queue}-bare", workflows=[BareAgentShape], activities=[noop])
    hand = HandwrittenActivities(base_url)
    handwritten = Worker(
        plain,
        task_queue=f"{task_queue}-hand",
        workflows=[HandwrittenAgentLoop],
        activities=[hand.chat, hand.get_weather],
    )
    # Every process shares STATE_DIR (one payload store, one key file) and proves it to the queue's registry
    # first, as agentsteps worker does: a worker with a store of its own loses the others' payloads.
    async with running_worker(client, settings, queue_check=QueueCheck()), bare, handwritten:
        settle_heap()  # as agentsteps worker does
        print("ready", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()


if __name__ == "__main__":
    try:
        asyncio.run(serve(*sys.argv[1:5]))
    finally:
        sys.stdout.flush()
        os._exit(0)  # temporalio issue #300
