"""``--json``: stdout carries exactly one JSON document, in every outcome.

Two things broke that: text written to file descriptor 1 by code that is not
ours (the Temporal core's ANSI log lines, "Failing workflow task ...
Nondeterminism", exactly when ``replay --check`` fails), and failures, which
printed their one line on stderr and nothing on stdout. So, for a ``--json``
command, ``JsonStdout``:

- points descriptor 1 at stderr and gives ``sys.stdout`` a private duplicate of
  the real stdout: whatever writes to the descriptor lands on stderr, and only
  what the command prints through ``sys.stdout`` (its document) reaches stdout;
- keeps the last line the command wrote on stderr, and if the command ends
  without printing its document, prints ``agentsteps/error@1`` naming that
  failure (its type when the line names one) and the exit status. The line
  stays on stderr for a person.
"""

from __future__ import annotations

import io
import os
import re
import sys
from typing import Any, TextIO

from .json_output import ERROR, SHAPES, print_json

# "error: SessionClosedError: ...", "run failed: BudgetExceededError: ...", argparse's "agentsteps run: error:
# ...": the line a failure ends with.
_FAILURE_LINE = re.compile(r"^(?:error|[\w ]+ failed|agentsteps[\w -]*: error): (.*)$")
_TYPE = re.compile(r"^([A-Z]\w*(?:Error|Resume)): ")


class _Watched(io.TextIOBase):
    """A text stream that passes everything on and remembers what went through."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.written = False
        self.lines: list[str] = []
        self._partial = ""

    def write(self, text: str) -> int:
        if text:
            self.written = True
            self._partial += text
            *done, self._partial = self._partial.split("\n")
            self.lines.extend(line for line in done if line.strip())
            self.lines = self.lines[-50:]
        return self.inner.write(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.inner.encoding


class JsonStdout:
    def __init__(self, command: str) -> None:
        self.command = command
        sys.stdout.flush()
        real = os.dup(1)
        os.dup2(2, 1)
        self.stdout = _Watched(open(real, "w", encoding="utf-8", closefd=True))  # noqa: SIM115 (lives until exit)
        self.stderr = _Watched(sys.stderr)
        sys.stdout = self.stdout
        sys.stderr = self.stderr

    def finish(self, status: int) -> None:
        """Print the error document if the command failed without printing its own."""
        if status != 0 and not self.stdout.written:
            print_json(ERROR, failure_body(self.command, status, self.stderr.lines), indent=None)  # to self.stdout
        self.stdout.flush()


def command_of(argv: list[str]) -> str:
    """The ``--json`` command ``argv`` runs, as ``SHAPES`` names it (``tools list``, ``replay``)."""
    words: list[str] = []
    value_of_config = False
    for token in argv:
        if value_of_config:
            value_of_config = False
        elif token == "--config":
            value_of_config = True
        elif not token.startswith("-"):
            words.append(token)
        elif words:
            break
    return " ".join(words[:2]) if tuple(words[:2]) in SHAPES else (words[0] if words else "agentsteps")


def failure_body(command: str, status: int, stderr_lines: list[str]) -> dict[str, Any]:
    """What ``agentsteps/error@1`` says: the command, its exit status, and the failure's type and message."""
    found = [m.group(1) for line in stderr_lines if (m := _FAILURE_LINE.match(line.strip()))]
    message = found[-1] if found else (stderr_lines[-1].strip() if stderr_lines else f"exit status {status}")
    kind = _TYPE.match(message)
    return {
        "command": command,
        "exit_code": status,
        "error": {"type": kind.group(1) if kind else None, "message": message},
    }


__all__ = ["JsonStdout", "command_of", "failure_body"]
