"""``python -m agentsteps.examples.tickets``: seed and serve the ticket tracker.

    python -m agentsteps.examples.tickets --db tickets.db --seed-issues 5000 --seed-only
    TICKETS_EXPECTED_TOKEN=... python -m agentsteps.examples.tickets --transport http --db tickets.db --port 8765
    python -m agentsteps.examples.tickets --transport stdio --db tickets.db --token-file /run/secrets/tickets

For stdio the client passes its token as ``TICKETS_API_TOKEN`` in the child's
environment; for HTTP as ``Authorization: Bearer``. See ``server.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import anyio

from .db import TicketStore
from .seed import seed
from .server import run_http, run_stdio


def _expected_token(args: argparse.Namespace) -> str | None:
    if args.insecure_no_auth:
        return None
    if args.token_file is not None:
        token = Path(args.token_file).read_text().strip()
    else:
        token = os.environ.get("TICKETS_EXPECTED_TOKEN", "").strip()
    if not token:
        sys.exit(
            "tickets: no expected token: pass --token-file, set TICKETS_EXPECTED_TOKEN, or run with --insecure-no-auth"
        )
    return token


def build_parser() -> argparse.ArgumentParser:
    """The tracker's arguments (``tests/deploy/test_deploy_commands.py`` checks what deploy/ passes against them)."""
    parser = argparse.ArgumentParser(
        prog="python -m agentsteps.examples.tickets",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--db", required=True, help="SQLite file; created if missing")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token-file", help="file holding the API token clients must present")
    parser.add_argument("--insecure-no-auth", action="store_true", help="accept every caller (local demos only)")
    parser.add_argument("--seed-issues", type=int, default=0, help="seed this many issues if the database is empty")
    parser.add_argument("--seed", type=int, default=7, help="generator seed")
    parser.add_argument("--seed-only", action="store_true", help="seed and exit without serving")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)

    if args.seed_issues:
        written = seed(args.db, issues=args.seed_issues, seed=args.seed)
        print(f"tickets: seeded {written} issues into {args.db}", file=sys.stderr)
    if args.seed_only:
        return

    expected = _expected_token(args)
    store = TicketStore(args.db)
    try:
        if args.transport == "stdio":
            anyio.run(
                lambda: run_stdio(store, expected_token=expected, presented_token=os.environ.get("TICKETS_API_TOKEN"))
            )
        else:
            anyio.run(lambda: run_http(store, host=args.host, port=args.port, expected_token=expected))
    finally:
        store.close()


if __name__ == "__main__":
    main()
