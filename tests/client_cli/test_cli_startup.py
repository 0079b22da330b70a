"""``agentsteps --help``, ``--version`` and ``COMMAND --help`` import none of what the commands run on.

Checked on ``sys.modules`` in a fresh interpreter, not timed (``bench/cli_startup.py`` has the figures):
the parser is built from ``cli/arguments.py``, and each command's module is imported when it runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from agentsteps.cli.arguments import scripted_model_arguments
from agentsteps.scripted_model.cli import build_parser

pytestmark = pytest.mark.fast

HEAVY = ("temporalio", "anthropic", "openai", "mcp", "agentsteps.worker", "agentsteps.activities", "aiohttp")
"""Package prefixes none of which ``--help`` or ``--version`` may import (temporalio.worker, the SDKs, MCP...)."""

_PROBE = """
import json, sys
from agentsteps.cli import main
loaded = {}
for argv in %r:
    sys.argv = ["agentsteps", *argv]
    try:
        main()
    except SystemExit:
        pass
    loaded[" ".join(argv)] = sorted(m for m in sys.modules if m.split(".")[0] in %r or m.startswith(%r))
print(json.dumps(loaded))
"""


def _imported_by(*argvs: list[str]) -> dict[str, list[str]]:
    roots = tuple(h for h in HEAVY if "." not in h)
    deep = tuple(h for h in HEAVY if "." in h)
    probe = _PROBE % ([list(a) for a in argvs], roots, deep)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_version_and_help_import_no_worker_sdk_or_mcp():
    loaded = _imported_by(["--version"], ["--help"])
    assert loaded == {"--version": [], "--help": []}


def test_every_command_help_imports_no_worker_sdk_or_mcp():
    commands = ["fork", "replay", "run", "chat", "schedule", "payloads", "quota", "budget", "scripted-model", "dev"]
    loaded = _imported_by(*[[c, "--help"] for c in commands])
    assert loaded == {f"{c} --help": [] for c in commands}


def test_the_cli_and_python_m_scripted_model_take_the_same_arguments():
    ours = argparse.ArgumentParser()
    scripted_model_arguments(ours)
    theirs = build_parser()

    def shape(parser: argparse.ArgumentParser) -> list[tuple]:
        return [(a.option_strings, a.dest, a.default, a.required, a.help) for a in parser._actions[1:]]

    assert shape(ours) == shape(theirs)
    # The same quota parsing too: a bad quota is refused the same way by both.
    for parser in (ours, theirs):
        with pytest.raises(SystemExit):
            parser.parse_args(["--script", "s.json", "--quota", "tpm=-1"])
