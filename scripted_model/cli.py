"""Serving a script file from the command line (``agentsteps scripted-model``)."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from .script import Script
from .server import ScriptedModelServer


def run_cli(script_path: str, port: int, host: str = "127.0.0.1") -> None:
    """Serve ``script_path`` until Ctrl-C, after printing where clients should point."""
    script = Script.load(script_path)
    with ScriptedModelServer(script, host=host, port=port) as server:
        print(f"scripted model (a test double) serving {script_path}", flush=True)
        print(f"  OPENAI_BASE_URL={server.url_openai}", flush=True)
        print(f"  ANTHROPIC_BASE_URL={server.url_anthropic}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="agentsteps scripted-model")
    parser.add_argument("--script", required=True, help="script file (JSON), see docs/scripted-model.md")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--host", default="127.0.0.1")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    run_cli(args.script, args.port, args.host)
