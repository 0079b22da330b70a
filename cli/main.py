"""The ``agentsteps`` command line.

Every command ends through ``_exit`` (``os._exit`` after flushing) because of
temporalio issue #300: a process that used a Temporal client can abort while
the interpreter finalizes, which would turn a success into exit code 134.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn

from . import arguments

if TYPE_CHECKING:  # the settings load only for the commands that need them: the CLI starts quickly
    from ..contracts.config.settings import WorkerSettings
    from .json_stdout import JsonStdout

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2


def main(argv: list[str] | None = None) -> NoReturn:
    argv = sys.argv[1:] if argv is None else argv
    guard = _json_stdout(argv)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # refused arguments: with --json, their line still becomes the one document
        if guard is not None:
            guard.finish(exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT)
        raise
    if not hasattr(args, "handler"):
        parser.print_help()
        _exit(EXIT_BAD_INPUT)
    # Only once a command runs: --help and --version answer without them (cli/arguments.py says why).
    import logging
    import traceback

    from ..contracts import AgentStepsError, InvalidSpecError
    from .failure_lines import configure_logging, describe

    level = configure_logging(args.debug)
    try:
        status = args.handler(args)
    except InvalidSpecError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        status = EXIT_BAD_INPUT
    except AgentStepsError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        status = EXIT_RUN_FAILED
    except KeyboardInterrupt:
        status = 130
    except SystemExit as exc:  # a library's sys.exit (uvicorn's on a failed bind) still leaves through _exit
        status = exc.code if isinstance(exc.code, int) else EXIT_RUN_FAILED
    except Exception as exc:  # anything else still ends on one line that names it
        if level <= logging.DEBUG:
            traceback.print_exc()
        print(f"error: {describe(exc)}", file=sys.stderr)
        if level > logging.DEBUG:
            print("(agentsteps --debug ... shows the traceback)", file=sys.stderr)
        status = EXIT_RUN_FAILED
    if guard is not None:
        guard.finish(status)
    _exit(status)


def _json_stdout(argv: list[str]) -> JsonStdout | None:
    """For a ``--json`` command: stdout keeps to its one document, failures included (``cli/json_stdout.py``)."""
    if "--json" not in argv:
        return None
    from .json_stdout import JsonStdout, command_of

    return JsonStdout(command_of(argv))


def _exit(status: int) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentsteps", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--config", help="TOML config file (default: ./agentsteps.toml if present)")
    parser.add_argument(
        "--debug", action="store_true", help="log at debug level, with tracebacks (also AGENTSTEPS_LOG_LEVEL=DEBUG)"
    )
    sub = parser.add_subparsers(metavar="COMMAND")

    def command(name: str, handler: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        return p

    command("demo", _demo, "Run the demo on the embedded stack (offline scripted model without an API key).")
    dev = command(
        "dev",
        _dev,
        "Keep the embedded stack running: Temporal server, UI and a worker "
        "(the offline scripted model when no API key is set).",
    )
    dev.add_argument("--port", type=int, help="Temporal server port on 127.0.0.1 (default 7233; AGENTSTEPS_DEV_PORT)")
    dev.add_argument("--ui-port", type=int, help="Temporal UI port (default 8233; AGENTSTEPS_DEV_UI_PORT)")
    dev.add_argument("--metrics-port", type=int, help="/metrics port (default 9464; AGENTSTEPS_METRICS_PORT)")
    dev.add_argument("--console-port", type=int, help="the console's port (default 8234)")
    console = command("console", _console, "Serve the web console: approvals, runs, sessions (docs/console.md).")
    console.add_argument("--port", type=int, help="port (default 8234)")
    console.add_argument(
        "--host", help="address to bind (default 127.0.0.1; anything else needs a token or an auth proxy)"
    )
    worker = command("worker", _worker, "Run a worker against TEMPORAL_ADDRESS (production).")
    worker.add_argument(
        "--replace-fleet",
        action="store_true",
        help="take the task queue over from workers with another store, key or config (a rolling upgrade to an "
        "incompatible config): they stop polling at their next renewal (docs/deployment.md)",
    )

    run = command("run", _run, "Start an agent run or a pipeline, show its progress and print the result.")
    target = run.add_mutually_exclusive_group(required=True)
    target.add_argument("--spec", help="AgentSpec file (.json or .toml)")
    target.add_argument("--pipeline", help="pipeline file (.toml or .json); --input is then JSON")
    run.add_argument("--input", required=True, help="the user input (a JSON value for --pipeline)")
    run.add_argument("--json", action="store_true", help="print only the result, as one JSON object")
    run.add_argument("--tenant", help="the customer the run bills to: its quotas and budget ([worker.quotas])")
    _worker_flags(run)

    chat = command("chat", _chat, "Talk to an agent in a durable session; resume it days later with --session.")
    opened = chat.add_mutually_exclusive_group(required=True)
    opened.add_argument("--spec", help="AgentSpec file: start a new session")
    opened.add_argument("--session", help="resume this session id")
    _worker_flags(chat)

    session = command("session", _session, "List open sessions, show one, close one, or rewind one to an earlier turn.")
    session.add_argument("action", choices=["list", "show", "close", "rewind"])
    session.add_argument("session_id", nargs="?")
    session.add_argument("--reason", default="closed from the command line")
    _worker_flags(session)
    session.add_argument("--to-turn", type=int, help="rewind: go on from the state after this turn (0: a fresh start)")

    check = command(
        "check", _check, "Prove a pipeline's edges compatible; non-zero on a refuted or unacknowledged edge."
    )
    check.add_argument("file")
    check.add_argument("--json", action="store_true", help="print the edge reports as JSON")

    schedule = command(
        "schedule", _schedule, "Apply, list, pause, resume or trigger the schedules in deploy/schedules."
    )
    arguments.schedule_arguments(schedule)

    payloads = sub.add_parser("payloads", help="Operate the payload store: 'payloads gc --older-than 30d [--delete]'.")
    arguments.payloads_arguments(payloads, _payloads_gc)

    arguments.quota_arguments(
        sub.add_parser("quota", help="Read or raise a provider quota's live limits (docs/quotas.md)."),
        "quota",
        _quota,
    )
    arguments.quota_arguments(
        sub.add_parser("budget", help="Read or raise a tenant's live budget and weight (docs/quotas.md)."),
        "tenant",
        _budget,
    )

    fork = command(
        "fork",
        _fork,
        "Start a new run from a recorded agent run's state before a step (or a new session from a session turn's); "
        "no effect repeated.",
    )
    arguments.fork_arguments(fork)

    replay = command(
        "replay",
        _replay,
        "Replay recorded runs: --check against this build's workflows (a deploy gate), or with --spec/--model (an "
        "eval).",
    )
    arguments.replay_arguments(replay)

    scripted = command("scripted-model", _scripted_model, "Serve the scripted model (a test double) over HTTP.")
    # The same arguments (and default port) as ``python -m agentsteps.scripted_model``.
    arguments.scripted_model_arguments(scripted)

    tools = sub.add_parser("tools", help="Inspect and exercise the tools the worker offers (Python and MCP).")
    tools_sub = tools.add_subparsers(metavar="ACTION")
    tools_list = tools_sub.add_parser("list", help="List every tool with its input and output schemas.")
    tools_list.add_argument("--json", action="store_true")
    tools_list.set_defaults(handler=_tools_list)
    tools_call = tools_sub.add_parser("call", help="Call one tool through the worker's client code.")
    tools_call.add_argument("name")
    tools_call.add_argument("--args", default="{}", help="arguments as a JSON object")
    tools_call.set_defaults(handler=_tools_call)
    for action in (tools_list, tools_call):
        # Also accepted after the verb, as documented; SUPPRESS keeps a --config given before it.
        action.add_argument("--config", default=argparse.SUPPRESS, help="TOML config file")

    schema = command("schema", _schema, "Print the JSON Schema of the public types (all, or one by name).")
    schema.add_argument("name", nargs="?")
    return parser


class _Version(argparse.Action):
    """argparse's ``version`` action, reading the version only when asked (``agentsteps/__init__.py``)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show program's version number and exit"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from .. import __version__

        print(f"agentsteps {__version__}")
        parser.exit()


def _until_done(awaitable: Coroutine[Any, Any, int]) -> int:
    import asyncio  # only once a command runs

    return asyncio.run(awaitable)


def _worker_flags(parser: argparse.ArgumentParser) -> None:
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument(
        "--worker",
        dest="worker",
        action="store_const",
        const="yes",
        default="auto",
        help="run a worker in this process even against a cluster (it must pass the checks of "
        "`agentsteps worker`, and agree with any worker already on the queue)",
    )
    choice.add_argument(
        "--no-worker",
        dest="worker",
        action="store_const",
        const="no",
        help="never run a worker here; use the ones polling the task queue",
    )


def _settings(args: argparse.Namespace) -> WorkerSettings:
    from ..client.settings import load_settings

    return load_settings(args.config)


def _demo(args: argparse.Namespace) -> int:
    from ..demos import run_demo

    return _until_done(run_demo(_settings(args)))


def _dev(args: argparse.Namespace) -> int:
    from .stop_signal import install_early

    install_early()
    from .dev import run_dev

    settings = _console_settings(args, port=args.console_port)
    moved = {"dev_port": args.port, "dev_ui_port": args.ui_port, "metrics_port": args.metrics_port}
    settings = settings.model_copy(update={k: v for k, v in moved.items() if v is not None})
    return _until_done(run_dev(settings))


def _console(args: argparse.Namespace) -> int:
    from .console import run_console

    return _until_done(run_console(_console_settings(args, port=args.port, host=args.host)))


def _console_settings(args: argparse.Namespace, *, port: int | None = None, host: str | None = None) -> WorkerSettings:
    settings = _settings(args)
    update = {k: v for k, v in (("port", port), ("host", host)) if v is not None}
    if update:
        settings = settings.model_copy(update={"console": settings.console.model_copy(update=update)})
    return settings


def _worker(args: argparse.Namespace) -> int:
    from .stop_signal import install_early

    install_early()  # before the slow part: a SIGTERM while starting drains instead of killing
    from .dev import run_worker_only

    return _until_done(run_worker_only(_settings(args), replace_fleet=args.replace_fleet))


def _run(args: argparse.Namespace) -> int:
    from .run import run_from_spec, run_pipeline

    if args.pipeline:
        return _until_done(
            run_pipeline(_settings(args), args.pipeline, args.input, as_json=args.json, worker=args.worker)
        )
    return _until_done(
        run_from_spec(_settings(args), args.spec, args.input, as_json=args.json, worker=args.worker, tenant=args.tenant)
    )


def _chat(args: argparse.Namespace) -> int:
    from .chat import SessionNotFound, chat

    try:
        return _until_done(chat(_settings(args), args.spec, args.session, worker=args.worker))
    except SessionNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    except KeyboardInterrupt:  # before the chat's loop: a --spec session has not started yet
        if args.session:
            print(
                f"\nsession {args.session} stays open; resume it with agentsteps chat --session {args.session}",
                file=sys.stderr,
            )
        else:
            print("\ninterrupted before the first message: no session was started", file=sys.stderr)
        return EXIT_OK


def _session(args: argparse.Namespace) -> int:
    from .chat import session_command

    if args.action != "list" and not args.session_id:
        print(f"error: session {args.action} needs a session id", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _until_done(
        session_command(
            _settings(args),
            args.action,
            args.session_id,
            args.reason,
            sys.stdout,
            worker=args.worker,
            to_turn=args.to_turn,
        )
    )


def _check(args: argparse.Namespace) -> int:
    from .check import check_command

    return check_command(args.file, args.json)


def _fork(args: argparse.Namespace) -> int:
    from .fork import fork_command

    return _until_done(fork_command(_settings(args), args))


def _replay(args: argparse.Namespace) -> int:
    from .replay import replay_command

    return _until_done(replay_command(_settings(args), args))


def _scripted_model(args: argparse.Namespace) -> int:
    from ..scripted_model import run_cli

    run_cli(args.script, args.port, host=args.host, quotas=args.quota)
    return EXIT_OK


def _schedule(args: argparse.Namespace) -> int:
    from .schedule import schedule_command

    return schedule_command(args)


def _payloads_gc(args: argparse.Namespace) -> int:
    from .payloads import payloads_gc

    return payloads_gc(args)


def _quota(args: argparse.Namespace) -> int:
    from .quotas import quota_command

    return quota_command(args, "quota")


def _budget(args: argparse.Namespace) -> int:
    from .quotas import quota_command

    return quota_command(args, "tenant")


def _tools_list(args: argparse.Namespace) -> int:
    from .tools import tools_list

    return tools_list(args.config, args.json)


def _tools_call(args: argparse.Namespace) -> int:
    from .tools import tools_call

    return tools_call(args.name, args.args, args.config)


def _schema(args: argparse.Namespace) -> int:
    from ..contracts.schema_export import export_schemas

    schemas = export_schemas()
    if args.name:
        if args.name not in schemas:
            print(f"error: unknown type {args.name!r}; known: {', '.join(sorted(schemas))}", file=sys.stderr)
            return EXIT_BAD_INPUT
        schemas = schemas[args.name]
    print(json.dumps(schemas, indent=2))
    return EXIT_OK
