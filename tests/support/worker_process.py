"""A worker in its own process, so a test can SIGKILL it mid-run.

usage: python worker_process.py ADDRESS TASK_QUEUE OPENAI_BASE_URL STATE_DIR

``AGENTSTEPS_TEST_QUOTAS``: the ``[worker.quotas]`` table as JSON (a worker's own config decides a run's quotas).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from child_main import run_child, serve_until_killed, worker_options

from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.quotas.config import QuotaSettings
from agentsteps.worker import connect, running_worker


async def main(address: str, task_queue: str, base_url: str, state_dir: str) -> None:
    settings = WorkerSettings(
        temporal_address=address,
        task_queue=task_queue,
        state_dir=Path(state_dir),
        providers=ProviderSettings(openai_base_url=base_url),
        quotas=QuotaSettings.model_validate_json(os.environ.get("AGENTSTEPS_TEST_QUOTAS") or "{}"),
    )
    if os.environ.get("AGENTSTEPS_TEST_WARM_OPENAI"):
        # A replacement worker that answers at once, as a long-running one does: the SDK a first call would
        # import (seconds on a loaded machine) is imported before the worker polls.
        import agentsteps.activities.llm.providers.openai  # noqa: F401
    client = await connect(settings)
    async with running_worker(client, settings, **worker_options()):
        await serve_until_killed()


if __name__ == "__main__":
    run_child(main, *sys.argv[1:5])
