"""CPU seconds per test file, for finding what `make test` spends (``AGENTSTEPS_TEST_CPU=path``).

On the 2-core machine the suite is bound by CPU, and ``--durations`` shows wall
time, which a loaded machine inflates for every test alike. This counts, per
file (measured where one file's tests begin and end, so the cost is two scans of
``/proc`` a file), the CPU of the pytest process, of the children it reaped (worker
processes, CLI commands, builds) and of the processes still running under it
(its Temporal dev server, module-scoped servers), and appends one JSON line per
file to the path: ``{"file", "cpu", "wall", "tests"}``. Summed over files it is
the suite's CPU less the servers' idle time between tests.

    AGENTSTEPS_TEST_CPU=/tmp/cpu.jsonl make test
    python tests/support/cpu_report.py /tmp/cpu.jsonl     # the files, most CPU first
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _descendants_cpu(root: int) -> float:
    """CPU seconds of every live process under ``root`` (not ``root`` itself)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        ticks[pid] = int(fields[11]) + int(fields[12])
    total = 0
    for pid, tick in ticks.items():
        up, seen = parent.get(pid), 0
        while up and up != root and seen < 64:
            up, seen = parent.get(up), seen + 1
        if up == root:
            total += tick
    return total / _TICK


def cpu_now() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _descendants_cpu(os.getpid())


class CpuReport:
    """A pytest plugin: per-file CPU and wall, appended to ``path`` at the end of the session."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        self.began: tuple[float, float] | None = None

    def before(self) -> None:
        """A test starts: the first of its file starts the count."""
        if self.began is None:
            self.began = (cpu_now(), time.monotonic())

    def after(self, file: str, last_of_file: bool) -> None:
        """A test ended, its teardown included (module fixtures end with the file's last test)."""
        entry = self.files[file]
        entry[2] += 1
        if last_of_file and self.began is not None:
            entry[0] += cpu_now() - self.began[0]
            entry[1] += time.monotonic() - self.began[1]
            self.began = None

    def write(self) -> None:
        with open(self.path, "a") as out:
            for file, (cpu, wall, tests) in self.files.items():
                out.write(json.dumps({"file": file, "cpu": round(cpu, 2), "wall": round(wall, 2), "tests": tests}))
                out.write("\n")


def summary(path: Path, top: int = 40) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: -r["cpu"])
    lines = [f"{sum(r['cpu'] for r in rows):8.1f} s CPU, {sum(r['wall'] for r in rows):8.1f} s wall: all files"]
    lines += [f"{r['cpu']:8.1f} {r['wall']:8.1f} {r['tests']:5d}  {r['file']}" for r in rows[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
