"""``agentsteps run``: start a run from a spec file, follow it, print the result."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import TextIO

from temporalio.client import Client, WorkflowFailureError

from ..client.pipeline_files import load_pipeline_file
from ..client.report import print_progress, print_result
from ..client.runs import follow, start_agent_run
from ..client.sessions import pending_approvals
from ..client.spec_files import load_spec
from ..contracts import AgentStepsError, InvalidSpecError, Violation, ViolationKind
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
        announcing = asyncio.ensure_future(announce_approvals(client, handle.id, settings, progress))
        try:
            result = await follow(handle, lambda s: print_progress(s, progress))
        except (AgentStepsError, WorkflowFailureError) as exc:
            print(f"run failed: {describe(exc)}", file=sys.stderr)
            return 1
        finally:
            announcing.cancel()
    if as_json:
        print_json(RUN, result.model_dump(mode="json"), indent=None)
    else:
        print_result(result, sys.stdout)
    return 0


async def announce_approvals(
    client: Client, workflow_id: str, settings: WorkerSettings, out: TextIO, interval: float = 1.0
) -> None:
    """While the run is followed: one line per call that waits for a person, saying where to decide it."""
    told: set[str] = set()
    while True:
        try:
            pending = await pending_approvals(client, workflow_id)
        except Exception:  # the run may not have started its first task yet, or has just ended
            pending = []
        for call in pending:
            if call.approval_id not in told:
                told.add(call.approval_id)
                where = client.service_client.config.target_host, client.namespace
                print(approval_line(workflow_id, call.tool, call.approval_id, settings, where), file=out, flush=True)
        await asyncio.sleep(interval)


def approval_line(
    workflow_id: str, tool: str, approval_id: str, settings: WorkerSettings, server: tuple[str, str]
) -> str:
    """Where a waiting call is decided: the console's inbox, or the ``approve`` Update by name on ``server``
    (address, namespace)."""
    console = f"http://{settings.console.host}:{settings.console.port}/approvals"
    decision = json.dumps({"approval_id": approval_id, "approver": "YOUR NAME"})
    address, namespace = server
    on = f"--address {address}" + (f" --namespace {namespace}" if namespace != "default" else "")
    return (
        f"run {workflow_id} waits for a person to approve {tool} (approval {approval_id}): decide in the console "
        f"at {console} (agentsteps dev or agentsteps console serves it), or run: temporal workflow update execute "
        f"{on} --workflow-id {workflow_id} --name approve --input '{decision}' (--name reject to refuse)"
    )


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
