"""``agentsteps run``: start a run from a spec file, follow it, print the result."""

from __future__ import annotations

import json
import sys
import uuid
from contextlib import AsyncExitStack

from temporalio.client import WorkflowFailureError

from ..contracts import InvalidSpecError, Violation, ViolationKind
from ..contracts.names import PIPELINE_WORKFLOW
from ..contracts.composition.pipeline_run import PipelineResult, pipeline_input
from ..contracts.config.settings import WorkerSettings
from ..client.pipeline_files import load_pipeline_file
from ..client.report import print_progress, print_result
from ..client.runs import follow, start_agent_run
from ..client.spec_files import load_spec
from ..client.dev_server import embedded_temporal
from ..worker import connect, load_registry, running_worker


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


async def run_pipeline(settings: WorkerSettings, path: str, input_json: str, *, as_json: bool, worker: bool) -> int:
    loaded = load_pipeline_file(path)
    try:
        value = json.loads(input_json)
    except json.JSONDecodeError as exc:
        raise InvalidSpecError(
            [Violation(contract="pipeline", phase="pre", kind=ViolationKind.invalid_config, path="$.input",
                       message=f"--input must be JSON for a pipeline: {exc}")]
        ) from None
    async with AsyncExitStack() as stack:
        temporal = await stack.enter_async_context(embedded_temporal(settings))
        client = await connect(settings, temporal.address)
        if worker:
            await stack.enter_async_context(running_worker(client, settings))
        handle = await client.start_workflow(
            PIPELINE_WORKFLOW,
            pipeline_input(loaded.spec, loaded.contracts, value),
            id=f"pipeline-{loaded.spec.name}-{uuid.uuid4().hex[:12]}",
            task_queue=settings.task_queue,
            result_type=PipelineResult,
        )
        print(f"pipeline {handle.id} started", file=sys.stderr)
        try:
            result = await handle.result()
        except WorkflowFailureError as exc:
            print(f"pipeline failed: {exc.cause}", file=sys.stderr)
            return 1
    if as_json:
        print(result.model_dump_json())
        return 0
    print(f"status: {result.status}")
    for edge in result.edges:
        verdict = "ok" if not edge.violations else f"{len(edge.violations)} violation(s)"
        print(f"  edge {edge.edge} (attempt {edge.attempt}): {verdict}")
    print(json.dumps(result.output, indent=2))
    return 0
