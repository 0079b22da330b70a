"""``agentsteps fork WORKFLOW_ID --at-step N``: a new run from a recorded run's state before step N."""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack

from temporalio.client import WorkflowFailureError

from ..client.dev_server import embedded_temporal
from ..client.forks import plan_fork, start_fork
from ..client.report import print_progress, print_result
from ..client.runs import follow
from ..client.spec_files import load_spec
from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import HistoryUnavailableError
from ..storage.payload_store import build_data_converter
from ..worker import connect, load_registry, running_worker
from .json_output import FORK, print_json


def configure_parser(fork: argparse.ArgumentParser) -> None:
    fork.add_argument("workflow_id", help="the recorded agent run to fork (it is only read)")
    fork.add_argument("--at-step", type=int, required=True,
                      help="start from the state before this step (0: the input; code mode counts model calls and program calls)")
    fork.add_argument("--spec", help="AgentSpec file the fork runs with (default: the source's)")
    fork.add_argument("--model", help="PROVIDER:MODEL replacing the source's model")
    fork.add_argument("--input", help="a new user message (at step 0: replaces the source's input)")
    fork.add_argument("--json", action="store_true", help="print only the fork's id and result, as one JSON object")
    fork.add_argument("--no-worker", action="store_true", help="do not run an in-process worker")


async def fork_command(settings: WorkerSettings, args: argparse.Namespace) -> int:
    spec = load_spec(args.spec) if args.spec else None
    async with AsyncExitStack() as stack:
        temporal = await stack.enter_async_context(embedded_temporal(settings))
        client = await connect(settings, temporal.address)
        if not args.no_worker:
            await stack.enter_async_context(running_worker(client, settings, registry=load_registry(settings)))
        try:
            plan = await plan_fork(
                client, args.workflow_id, args.at_step, data_converter=build_data_converter(settings),
                spec=spec, model=args.model, user_input=args.input,
            )
        except HistoryUnavailableError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        handle = await start_fork(client, plan, task_queue=settings.task_queue)
        print(f"fork {handle.id} of {args.workflow_id} at step {args.at_step} ({plan.where}) started", file=sys.stderr)
        try:
            result = await follow(handle, lambda s: print_progress(s, sys.stderr))
        except WorkflowFailureError as exc:
            print(f"fork failed: {exc.cause}", file=sys.stderr)
            return 1
    if args.json:
        print_json(FORK, {"fork_id": handle.id, "source": args.workflow_id, "at_step": args.at_step,
                          "result": result.model_dump(mode="json"), "at_call": plan.at_call})
    else:
        print(f"fork {handle.id}")
        print_result(result, sys.stdout)
    return 0
