"""``agentsteps run``: start a run from a spec file, follow it, print the result."""

from __future__ import annotations

import json
import sys
import uuid

from temporalio.client import WorkflowFailureError

from ..client.pipeline_files import load_pipeline_file
from ..client.report import print_progress, print_result
from ..client.runs import follow, start_agent_run
from ..client.spec_files import load_spec
from ..contracts import InvalidSpecError, Violation, ViolationKind
from ..contracts.composition.pipeline_run import PipelineResult, pipeline_input
from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import QuotaConfigError
from ..contracts.names import PIPELINE_WORKFLOW
from ..contracts.quotas.config import tenant_problem
from .failure_lines import describe
from .json_output import PIPELINE_RUN, RUN, print_json
from .workers import WorkerMode, client_and_worker


async def run_from_spec(
    settings: WorkerSettings,
    spec_path: str,
    user_input: str,
    *,
    as_json: bool,
    worker: WorkerMode,
    tenant: str | None = None,
) -> int:
    spec = load_spec(spec_path)
    problem = tenant_problem(tenant)  # before anything starts: a bad tenant is refused here
    if problem is not None:
        raise QuotaConfigError.with_message(problem)
    progress = sys.stderr
    async with client_and_worker(settings, worker, "run") as local:
        client, registry = local.client, local.registry
        # This worker's Python tools are known here; another worker's (and MCP tools) only to it, which re-checks.
        known = registry.schemas() if registry is not None and set(spec.tools) <= set(registry.schemas()) else None
        handle = await start_agent_run(
            client, spec, user_input, task_queue=local.task_queue, known_tools=known, tenant=tenant
        )
        print(f"run {handle.id} started", file=progress)
        try:
            result = await follow(handle, lambda s: print_progress(s, progress))
        except WorkflowFailureError as exc:
            print(f"run failed: {describe(exc)}", file=sys.stderr)
            return 1
    if as_json:
        print_json(RUN, result.model_dump(mode="json"), indent=None)
    else:
        print_result(result, sys.stdout)
    return 0


async def run_pipeline(
    settings: WorkerSettings, path: str, input_json: str, *, as_json: bool, worker: WorkerMode
) -> int:
    loaded = load_pipeline_file(path)
    try:
        value = json.loads(input_json)
    except json.JSONDecodeError as exc:
        raise InvalidSpecError(
            [
                Violation(
                    contract="pipeline",
                    phase="pre",
                    kind=ViolationKind.invalid_config,
                    path="$.input",
                    message=f"--input must be JSON for a pipeline: {exc}",
                )
            ]
        ) from None
    async with client_and_worker(settings, worker, "run") as local:
        client = local.client
        handle = await client.start_workflow(
            PIPELINE_WORKFLOW,
            pipeline_input(loaded.spec, loaded.contracts, value),
            id=f"pipeline-{loaded.spec.name}-{uuid.uuid4().hex[:12]}",
            task_queue=local.task_queue,
            result_type=PipelineResult,
        )
        print(f"pipeline {handle.id} started", file=sys.stderr)
        try:
            result = await handle.result()
        except WorkflowFailureError as exc:
            print(f"pipeline failed: {describe(exc)}", file=sys.stderr)
            return 1
    if as_json:
        print_json(PIPELINE_RUN, result.model_dump(mode="json"), indent=None)
        return 0
    print(f"status: {result.status}")
    for edge in result.edges:
        verdict = "ok" if not edge.violations else f"{len(edge.violations)} violation(s)"
        print(f"  edge {edge.edge} (attempt {edge.attempt}): {verdict}")
    print(json.dumps(result.output, indent=2))
    return 0
