"""A long-running worker hands the memory it freed back to the system, so its RSS follows what it holds.

At 10,000 sessions (``bench/fleet.py``) three workers went from 589 MiB to 2,434 MiB and stayed there after
every session closed, while their Python objects were flat once the caches filled: glibc keeps freed blocks
scattered under live ones. ``agentsteps worker`` now trims them once a minute (``returning_freed_memory``).
Measured in a child process of its own: the suite's process is no clean slate for RSS.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import asyncio, json
from agentsteps.worker import returning_freed_memory

def rss_mib():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

async def main():
    async with returning_freed_memory(every_seconds=0.1):
        start = rss_mib()
        blocks = [bytes(10_000 + i % 7) for i in range(20_000)]  # about 200 MiB from malloc, not pymalloc
        kept = blocks[::20]  # live blocks scattered among the freed ones keep the heap from shrinking itself
        del blocks
        freed = rss_mib()
        await asyncio.sleep(0.5)
        trimmed = rss_mib()
    print(json.dumps({"start": start, "freed": freed, "trimmed": trimmed, "kept": len(kept)}))

asyncio.run(main())
"""


def test_a_worker_returns_freed_memory_to_the_system_while_it_runs():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    mib = json.loads(out.stdout.strip().splitlines()[-1])
    assert mib["freed"] - mib["start"] > 150, f"the freed blocks stay in the process until trimmed: {mib}"
    assert mib["trimmed"] - mib["start"] < 40, f"the trim gave the freed blocks back (10 MiB are kept): {mib}"
