"""``agentsteps replay``: the deploy gate (``--check``) and counterfactual replays of recorded runs.

Exit codes: 0 every history replays (or every replayed run met the gate);
1 a non-determinism (or a counterfactual run that differs beyond the gate);
2 bad input, or a history the server no longer keeps.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from contextlib import AsyncExitStack
from functools import partial
from typing import TextIO

from ..activities.llm.metrics import cost_usd
from ..activities.mcp import SecretResolver, build_mcp_activities
from ..activities.tools.activities import ToolActivities
from ..activities.tools.recorded import RecordedTools
from ..activities.tools.registry import ToolRegistry
from ..client.counterfactual import load_sources, replay_runs
from ..client.counterfactual import render as render_scores
from ..client.counterfactual import report_json as counterfactual_json
from ..client.dev_server import embedded_temporal
from ..client.replay_check import (
    check_histories,
    history_files,
    render,
    report_json,
    server_histories,
    visibility_query,
)
from ..client.spec_files import load_spec
from ..contracts.config.mcp_config import McpConfig
from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import HistoryUnavailableError
from ..worker import (
    ENGINE_SANDBOX,
    build_data_converter,
    connect,
    load_registry,
    replayed_workflows,
    running_worker,
)
from .json_output import COUNTERFACTUAL, REPLAY_CHECK, print_json

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


async def replay_check(settings: WorkerSettings, args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return EXIT_INVALID
    converter = build_data_converter(settings)
    check = partial(
        check_histories, workflows=replayed_workflows(), data_converter=converter, workflow_runner=ENGINE_SANDBOX
    )
    try:
        if args.histories:
            findings = await check(history_files(args.histories))
        else:
            query = visibility_query(args.workflow_type, args.query)
            async with AsyncExitStack() as stack:
                temporal = await stack.enter_async_context(embedded_temporal(settings))
                client = await connect(settings, temporal.address)
                findings = await check(server_histories(client, query, args.limit))
    except HistoryUnavailableError as exc:
        print(f"error: HistoryUnavailableError: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print_json(REPLAY_CHECK, report_json(findings), out)
    else:
        print(render(findings) if findings else "no runs matched: nothing to replay", file=out)
    return EXIT_OK if all(f.ok for f in findings) else EXIT_FAILED


async def replay_command(settings: WorkerSettings, args: argparse.Namespace, out: TextIO | None = None) -> int:
    if args.check:
        if args.workflow_ids or args.spec or args.model:
            print(
                "error: --check replays histories against this build; it takes no WORKFLOW_ID, --spec or --model",
                file=sys.stderr,
            )
            return EXIT_INVALID
        return await replay_check(settings, args, out)
    if not args.workflow_ids or not (args.spec or args.model):
        print("error: say --check, or give WORKFLOW_IDs with --spec or --model", file=sys.stderr)
        return EXIT_INVALID
    return await counterfactual(settings, args, out)


async def counterfactual(settings: WorkerSettings, args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Replay the runs with the new spec or model on a private worker whose tools answer from the record."""
    out = out or sys.stdout
    spec = load_spec(args.spec) if args.spec else None
    allow = [t.strip() for t in args.allow_tools.split(",") if t.strip()]
    registry = load_registry(settings)
    found = {name: tool for name in allow if (tool := registry.get(name)) is not None}
    unknown = [t for t in allow if t not in found]
    if unknown:
        print(
            f"error: --allow-tools names tools this worker has no Python tool for: {', '.join(unknown)}",
            file=sys.stderr,
        )
        return EXIT_INVALID
    effectful = [t for t in allow if found[t].schema().side_effects]
    if effectful:
        print(
            f"error: --allow-tools takes read-only tools; these have side effects: {', '.join(effectful)}",
            file=sys.stderr,
        )
        return EXIT_INVALID
    read_only = ToolRegistry()
    for name in allow:
        read_only.add(found[name])
    live = ToolActivities(read_only) if allow else None
    tools = RecordedTools(live, allow)
    converter = build_data_converter(settings)
    try:
        async with AsyncExitStack() as stack:
            temporal = await stack.enter_async_context(embedded_temporal(settings))
            client = await connect(settings, temporal.address)
            sources = await load_sources(client, args.workflow_ids, converter)
            task_queue = f"replay-{uuid.uuid4().hex[:12]}"
            # No registry and no MCP servers: the recorded answers (and the allowed read-only tools) are all it has.
            await stack.enter_async_context(
                running_worker(
                    client,
                    settings,
                    registry=ToolRegistry(),
                    sources=[tools],
                    task_queue=task_queue,
                    mcp=build_mcp_activities(McpConfig(), SecretResolver({})),
                )
            )
            scores = await replay_runs(
                client,
                sources,
                task_queue=task_queue,
                tools=tools,
                spec=spec,
                model=args.model,
                cost=lambda model, usage: cost_usd(settings.prices, model, usage),
            )
    except HistoryUnavailableError as exc:
        print(f"error: HistoryUnavailableError: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print_json(COUNTERFACTUAL, counterfactual_json(scores), out)
    else:
        print(render_scores(scores), file=out)
    differ = sum(s.differs for s in scores)
    return EXIT_OK if differ <= args.max_differ else EXIT_FAILED
