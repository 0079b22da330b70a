"""A long-running worker process freezes its startup heap so the collector stops re-scanning it."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc
from agentsteps.worker import settle_heap
before = gc.get_freeze_count()
settle_heap()
print(before, gc.get_freeze_count(), gc.get_threshold()[0])
"""


def test_settle_heap_freezes_what_the_imports_built_and_collects_young_objects_less_often():
    # Its own process: what a freeze holds is never freed, so the test session must not do it.
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120)
    before, frozen, young_threshold = (int(n) for n in out.stdout.split())
    assert before == 0
    # The SDKs, schemas and tables the worker module imports: about 95,000 objects (the MCP SDK, loaded only
    # with a first MCP connection, is not among them).
    assert frozen > 50_000
    assert young_threshold > 700  # the interpreter's default
