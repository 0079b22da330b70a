"""``agentsteps fork WORKFLOW_ID --at-step N``: a new run from a recorded run's state before step N.

With ``--turn T`` the id is a session's: a new session from its state before step N of turn T, whose
first turn goes on from there (``client/session_forks.py``).
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack

from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError

from ..client.dev_server import embedded_temporal
from ..client.forks import SETTLE_SECONDS, plan_fork, start_fork
from ..client.report import print_progress, print_result
from ..client.runs import follow
from ..client.session_forks import plan_session_fork, start_session_fork
from ..client.spec_files import load_spec
from ..contracts import AgentSpec
from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import AgentStepsError, HistoryUnavailableError, SessionError
from ..worker import build_data_converter, connect, load_registry, running_worker
from .failure_lines import describe
from .json_output import FORK, print_json


async def fork_command(settings: WorkerSettings, args: argparse.Namespace) -> int:
    spec = load_spec(args.spec) if args.spec else None
    async with AsyncExitStack() as stack:
        temporal = await stack.enter_async_context(embedded_temporal(settings))
        client = await connect(settings, temporal.address)
        if not args.no_worker:
            await stack.enter_async_context(running_worker(client, settings, registry=load_registry(settings)))
        if getattr(args, "turn", None) is not None:
            return await _fork_turn(client, settings, args, spec)
        try:
            plan = await plan_fork(
                client,
                args.workflow_id,
                args.at_step,
                data_converter=build_data_converter(settings),
                spec=spec,
                model=args.model,
                user_input=args.input,
                settle_seconds=SETTLE_SECONDS if getattr(args, "settle", None) is None else args.settle,
            )
        except HistoryUnavailableError as exc:
            print(f"error: HistoryUnavailableError: {exc}", file=sys.stderr)
            return 2
        handle = await start_fork(client, plan, task_queue=settings.task_queue)
        print(f"fork {handle.id} of {args.workflow_id} at step {args.at_step} ({plan.where}) started", file=sys.stderr)
        if plan.unknown:
            print(
                f"the source is still making {len(plan.unknown)} call(s) with side effects ({', '.join(plan.unknown)}):"
                " the fork knows their outcome as unknown and will not make them again",
                file=sys.stderr,
            )
        try:
            result = await follow(handle, lambda s: print_progress(s, sys.stderr))
        except (AgentStepsError, WorkflowFailureError) as exc:
            print(f"fork failed: {describe(exc)}", file=sys.stderr)
            return 1
    if args.json:
        print_json(
            FORK,
            {
                "fork_id": handle.id,
                "source": args.workflow_id,
                "at_step": args.at_step,
                "result": result.model_dump(mode="json"),
                "at_call": plan.at_call,
                "turn": None,
            },
        )
    else:
        print(f"fork {handle.id}")
        print_result(result, sys.stdout)
    return 0


async def _fork_turn(client: Client, settings: WorkerSettings, args: argparse.Namespace, spec: AgentSpec | None) -> int:
    """``--turn T``: a new session from session WORKFLOW_ID's state before step N of turn T."""
    try:
        plan = await plan_session_fork(
            client,
            args.workflow_id,
            args.turn,
            args.at_step,
            data_converter=build_data_converter(settings),
            spec=spec,
            model=args.model,
            user_input=args.input,
            settle_seconds=SETTLE_SECONDS if getattr(args, "settle", None) is None else args.settle,
        )
    except (HistoryUnavailableError, SessionError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"fork {plan.fork_id} of session {args.workflow_id} {plan.where} started", file=sys.stderr)
    try:
        result = await start_session_fork(client, plan, task_queue=settings.task_queue)
    except (AgentStepsError, WorkflowUpdateFailedError) as exc:
        print(f"fork failed: {describe(exc)}", file=sys.stderr)
        return 1
    if args.json:
        body = result.model_dump(mode="json", exclude={"session_id", "turn"})
        print_json(
            FORK,
            {
                "fork_id": plan.fork_id,
                "source": args.workflow_id,
                "at_step": args.at_step,
                "result": body,
                "at_call": None,
                "turn": args.turn,
            },
        )
    else:
        print(f"fork {plan.fork_id} (a session: send it turns with agentsteps session / chat)")
        print_result(result, sys.stdout)
    return 0
