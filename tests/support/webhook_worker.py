"""A worker with the approval tools and one approval webhook, in its own process (a test SIGKILLs it).

usage: python webhook_worker.py ADDRESS TASK_QUEUE OPENAI_BASE_URL STATE_DIR WEBHOOK_URL CONSOLE_URL
(the webhook's secret in AGENTSTEPS_TEST_WEBHOOK_SECRET: never on a command line)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from approval_support import approval_registry, webhook_settings
from child_main import run_child, serve_until_killed, worker_options

from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.worker import connect, running_worker


async def main(address: str, task_queue: str, base_url: str, state_dir: str, url: str, console_url: str) -> None:
    settings = webhook_settings(
        WorkerSettings(
            temporal_address=address,
            task_queue=task_queue,
            state_dir=Path(state_dir),
            providers=ProviderSettings(openai_base_url=base_url),
        ),
        url,
        os.environ["AGENTSTEPS_TEST_WEBHOOK_SECRET"],
        console_url,
    )
    client = await connect(settings)
    async with running_worker(client, settings, registry=approval_registry([]), **worker_options()):
        await serve_until_killed()


if __name__ == "__main__":
    run_child(main, *sys.argv[1:7])
