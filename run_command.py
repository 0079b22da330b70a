"""``agentsteps run``: start a run from a spec file, follow it, print the result."""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack

from temporalio.client import WorkflowFailureError

from .contracts.settings import WorkerSettings
from .report import print_progress, print_result
from .runs import follow, start_agent_run
from .spec_files import load_spec
from .stack import embedded_temporal
from .worker import connect, load_registry, running_worker


async def run_from_spec(settings: WorkerSettings, spec_path: str, user_input: str, *, as_json: bool, worker: bool) -> int:
    spec = load_spec(spec_path)
    registry = load_registry(settings)
    progress = sys.stderr
    async with AsyncExitStack() as stack:
        temporal = await stack.enter_async_context(embedded_temporal(settings))
        client = await connect(settings, temporal.address)
        if worker:
            await stack.enter_async_context(running_worker(client, settings, registry=registry))
        # Python tools are known here; MCP tools only to the worker, which re-checks.
        known = registry.schemas() if set(spec.tools) <= set(registry.schemas()) else None
        handle = await start_agent_run(client, spec, user_input, task_queue=settings.task_queue, known_tools=known)
        print(f"run {handle.id} started", file=progress)
        try:
            result = await follow(handle, lambda s: print_progress(s, progress))
        except WorkflowFailureError as exc:
            cause = exc.cause
            print(f"run failed: {cause}", file=sys.stderr)
            return 1
    if as_json:
        print(result.model_dump_json())
    else:
        print_result(result, sys.stdout)
    return 0
