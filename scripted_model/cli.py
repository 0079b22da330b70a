"""Serving a script file from the command line (``agentsteps scripted-model``)."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from pydantic import ValidationError

from .script import ANY_MODEL, Quota, Script
from .server import ScriptedModelServer

_SHORT = {
    "rpm": "requests_per_minute",
    "itpm": "input_tokens_per_minute",
    "otpm": "output_tokens_per_minute",
    "tpm": "tokens_per_minute",
    "concurrency": "concurrent_requests",
}
"""``--quota`` spellings beside the script's own key names."""


def parse_quota(text: str) -> tuple[str, Quota]:
    """``[model=NAME,]rpm=60,tpm=40000,concurrency=4,window=fixed,window_seconds=60`` as ``(model, Quota)``.

    Keys are the script's ``Quota`` keys or their short names (rpm, itpm, otpm, tpm, concurrency);
    without ``model=`` the quota covers every model (``"*"``). Raises ``argparse.ArgumentTypeError``
    naming the part that is wrong.
    """
    model = ANY_MODEL
    fields: dict[str, object] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise argparse.ArgumentTypeError(f"{part!r} is not key=value (in quota {text!r})")
        if key == "model":
            model = value
            continue
        name = _SHORT.get(key, key)
        if name in fields:
            raise argparse.ArgumentTypeError(f"{key!r} given twice (in quota {text!r})")
        if name in ("window",):
            fields[name] = value
        elif name == "window_seconds":
            fields[name] = _number(value, float, key, text)
        elif name in Quota.model_fields:
            fields[name] = _number(value, int, key, text)
        else:
            known = ", ".join([*_SHORT, *(f for f in Quota.model_fields if f not in _SHORT.values()), "model"])
            raise argparse.ArgumentTypeError(f"unknown quota key {key!r} (known: {known})")
    try:
        return model, Quota.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'quota'}: {e['msg']}" for e in exc.errors())
        raise argparse.ArgumentTypeError(f"invalid quota {text!r}: {problems}") from None


def _number(value: str, kind: type, key: str, text: str) -> object:
    try:
        return kind(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{key}={value!r} is not a number (in quota {text!r})") from None


def run_cli(script_path: str, port: int, host: str = "127.0.0.1", quotas: Sequence[tuple[str, Quota]] = ()) -> None:
    """Serve ``script_path`` until Ctrl-C, after printing where clients should point.

    ``quotas`` (from ``--quota``) add to the script's own, replacing one for the same model."""
    script = Script.load(script_path)
    if quotas:
        script = script.model_copy(update={"quotas": {**script.quotas, **dict(quotas)}})
    with ScriptedModelServer(script, host=host, port=port) as server:
        print(f"scripted model (a test double) serving {script_path}", flush=True)
        print(f"  OPENAI_BASE_URL={server.url_openai}", flush=True)
        print(f"  ANTHROPIC_BASE_URL={server.url_anthropic}", flush=True)
        for model, quota in script.quotas.items():
            print(f"  quota {model}: {quota.model_dump(exclude_none=True)}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="agentsteps scripted-model")
    parser.add_argument("--script", required=True, help="script file (JSON), see docs/scripted-model.md")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--quota",
        action="append",
        type=parse_quota,
        default=[],
        metavar="SPEC",
        help="a rate limit answered with 429 beyond it, e.g. model=m-1,rpm=60,tpm=40000,"
        "concurrency=4,window=sliding (repeatable; see docs/scripted-model.md)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    run_cli(args.script, args.port, args.host, args.quota)
