"""``run_and_exit``: a short script that used a Temporal client ends with its own status, not a finalizer crash."""

from __future__ import annotations

import subprocess
import sys

import pytest

_SCRIPT = """
import sys
from agentsteps.client import run_and_exit

async def main():
    print("done", flush=False)
    if sys.argv[1] == "raise":
        raise ValueError("bad input")
    if sys.argv[1] == "exit":
        raise SystemExit(3)

run_and_exit(main())
print("never")
"""


@pytest.mark.parametrize("how, status", [("ok", 0), ("raise", 1), ("exit", 3)])
def test_the_exit_status_is_the_scripts_own_and_output_is_flushed(how, status):
    done = subprocess.run([sys.executable, "-c", _SCRIPT, how], capture_output=True, text=True, timeout=60)

    assert done.returncode == status
    assert done.stdout == "done\n"  # flushed before the exit, and nothing after it runs
    assert ("ValueError: bad input" in done.stderr) is (how == "raise")
