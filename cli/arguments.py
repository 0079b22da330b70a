"""The arguments of the subcommands that have their own module, built from nothing heavier than argparse.

``agentsteps --help``, ``--version`` and every ``COMMAND --help`` build the whole
parser, so it must not import what the commands run on (Temporal's client and
worker, the provider SDKs, MCP, pydantic models): each command's module is
imported when the command runs (the handlers in ``cli/main.py``), and the
``type=`` converters below import what they parse with only when a value is
parsed. ``tests/client_cli/test_cli_startup.py`` holds the parser to that.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timedelta
from typing import Any

Handler = Callable[[argparse.Namespace], int]

SCHEDULE_ACTIONS = ("apply", "list", "pause", "resume", "trigger")
SCHEDULE_DIRECTORY = "deploy/schedules"
"""``client.schedules.DEFAULT_DIRECTORY``, spelled here so that ``--help`` does not import the client."""


def schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentsteps schedule``; the handler is ``cli.schedule.schedule_command``."""
    parser.add_argument("action", choices=SCHEDULE_ACTIONS)
    parser.add_argument("name", nargs="?", help="schedule id (pause, resume, trigger)")
    parser.add_argument("--dir", default=SCHEDULE_DIRECTORY, help="schedule files (apply)")
    parser.add_argument("--note", help="note recorded with pause or resume")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object: the rows (list) or the changes made"
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="trigger: wait for the tick to end and print its result (the monitor's report)",
    )


def payloads_arguments(parser: argparse.ArgumentParser, gc_handler: Handler) -> None:
    actions = parser.add_subparsers(metavar="ACTION")
    gc = actions.add_parser("gc", help="Delete payloads no open workflow can still need (dry run by default).")
    gc.add_argument(
        "--older-than", required=True, type=_duration, help="only payloads stored before this long ago, e.g. 30d"
    )
    gc.add_argument("--delete", action="store_true", help="delete them (default: only report)")
    gc.add_argument("--json", action="store_true", help="print the report as one JSON object")
    gc.add_argument("--config", default=argparse.SUPPRESS, help="TOML config file")
    gc.set_defaults(handler=gc_handler)


def _duration(text: str) -> timedelta:
    from ..contracts.config.schedules import duration_from_text

    try:
        return duration_from_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def quota_arguments(parser: argparse.ArgumentParser, kind: str, handler: Handler) -> None:
    """``agentsteps quota`` (``kind`` "quota") or ``agentsteps budget`` ("tenant"): show and set."""
    actions = parser.add_subparsers(metavar="ACTION")
    what = "quota" if kind == "quota" else "tenant"
    show = actions.add_parser("show", help=f"The {what}'s live limits and what is in use.")
    change = actions.add_parser("set", help=f"Change the {what}'s live limits (the fields given).")
    for sub in (show, change):
        sub.add_argument("name", help=f"the {what}'s name in [worker.quotas]")
        sub.add_argument("--json", action="store_true", help="print the account as one JSON object")
        sub.add_argument("--config", default=argparse.SUPPRESS, help="TOML config file")
        sub.set_defaults(handler=handler)
    change.set_defaults(change=True)
    if kind == "quota":
        change.add_argument("--rpm", type=int, dest="requests_per_minute")
        change.add_argument("--input-tpm", type=int, dest="input_tokens_per_minute")
        change.add_argument("--output-tpm", type=int, dest="output_tokens_per_minute")
        change.add_argument("--concurrent", type=int, dest="concurrent_requests")
    else:
        change.add_argument("--weight", type=float)
        change.add_argument("--period", choices=["day", "month"])
        for unit, kind_ in (("tokens", int), ("usd", float)):
            for limit in ("soft", "hard"):
                change.add_argument(f"--{unit}-{limit}", type=kind_, dest=f"{unit}_{limit}")


def fork_arguments(fork: argparse.ArgumentParser) -> None:
    fork.add_argument(
        "workflow_id", help="the recorded agent run to fork, or with --turn the session (it is only read)"
    )
    fork.add_argument(
        "--at-step",
        type=int,
        required=True,
        help="start from the state before this step (0: the input; code mode counts model calls and program calls)",
    )
    fork.add_argument(
        "--turn",
        type=int,
        help="fork this turn of the session WORKFLOW_ID: a new session goes on from before its step N",
    )
    fork.add_argument("--spec", help="AgentSpec file the fork runs with (default: the source's)")
    fork.add_argument("--model", help="PROVIDER:MODEL replacing the source's model")
    fork.add_argument("--input", help="a new user message (at step 0: replaces the source's input)")
    fork.add_argument(
        "--settle",
        type=float,
        metavar="SECONDS",
        help="a running source inside a call with side effects: wait this long for its outcome, then the fork "
        "knows it as unknown and never makes it again (default 10)",
    )
    fork.add_argument("--json", action="store_true", help="print only the fork's id and result, as one JSON object")
    fork.add_argument("--no-worker", action="store_true", help="do not run an in-process worker")


def replay_arguments(replay: argparse.ArgumentParser) -> None:
    replay.add_argument(
        "workflow_ids", nargs="*", metavar="WORKFLOW_ID", help="recorded runs to replay with --spec/--model"
    )
    replay.add_argument("--check", action="store_true", help="replay recorded histories against this build's workflows")
    source = replay.add_mutually_exclusive_group()
    source.add_argument("--histories", help="a folder of history JSON files (e.g. tests/histories) instead of a server")
    source.add_argument("--type", dest="workflow_type", help="only runs of this workflow type (e.g. AgentWorkflow)")
    source.add_argument("--query", help="a Temporal visibility query selecting the runs")
    replay.add_argument(
        "--limit", type=int, default=50, help="at most this many recent runs from the server (default 50)"
    )
    replay.add_argument("--spec", help="counterfactual: AgentSpec file the recorded runs are replayed with")
    replay.add_argument("--model", help="counterfactual: PROVIDER:MODEL replacing each recorded run's model")
    replay.add_argument(
        "--allow-tools", default="", help="counterfactual: comma-separated read-only tools that may run live"
    )
    replay.add_argument(
        "--max-differ", type=int, default=0, help="counterfactual: exit 1 when more runs than this differ"
    )
    replay.add_argument("--json", action="store_true", help="print the report as one JSON object")


def scripted_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments (and default port) of ``python -m agentsteps.scripted_model``
    (``scripted_model.cli.build_parser``; a test holds the two the same)."""
    parser.add_argument("--script", required=True, help="script file (JSON), see docs/scripted-model.md")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--quota",
        action="append",
        type=_quota,
        default=[],
        metavar="SPEC",
        help="a rate limit answered with 429 beyond it, e.g. model=m-1,rpm=60,tpm=40000,"
        "concurrency=4,window=sliding (repeatable; see docs/scripted-model.md)",
    )


def _quota(text: str) -> Any:
    from ..scripted_model.cli import parse_quota

    return parse_quota(text)


__all__ = [
    "fork_arguments",
    "payloads_arguments",
    "quota_arguments",
    "replay_arguments",
    "schedule_arguments",
    "scripted_model_arguments",
]
