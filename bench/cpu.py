"""CPU seconds of processes, from /proc (Linux), for benchmarks that print CPU per run."""

from __future__ import annotations

import os

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def child_pids(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            pass
    return found


def temporal_server_pids() -> list[int]:
    """The dev server(s) this process started (the ``temporal`` CLI children)."""
    pids = []
    for child in child_pids(os.getpid()):
        try:
            with open(f"/proc/{child}/comm") as f:
                if f.read().strip() == "temporal":
                    pids.append(child)
        except FileNotFoundError:
            pass
    return pids
