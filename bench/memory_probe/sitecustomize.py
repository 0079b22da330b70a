"""A memory probe for benchmark workers: where a worker's RSS goes, read from the live process.

Put this folder on ``PYTHONPATH`` and set ``MEMDIAG_OUT`` (a path prefix) in a
process's environment; every ``SIGUSR2`` then writes ``<prefix>.<pid>.<time>.json``:
RSS before and after ``malloc_trim``, the number of objects the collector
tracks by type, glibc's ``mallinfo2`` (bytes in use and held free), CPython's
small-object arenas (``sys._debugmallocstats``), ``/proc/self/smaps_rollup``,
and, under ``PYTHONTRACEMALLOC=1``, the Python allocations still live by line
and by file. Issue 41's allocator runs used it on ``bench/fleet.py``'s
workers (docs/benchmarks.md, "Where a worker's memory stays"):

    MEMDIAG_OUT=/tmp/mem/p PYTHONPATH=bench/memory_probe .venv/bin/python bench/fleet.py ...
    pkill -USR2 -f 'agentsteps worker'   # as often as wanted
"""

import os

if os.environ.get("MEMDIAG_OUT"):
    import collections
    import ctypes
    import gc
    import json
    import signal
    import sys
    import tempfile
    import time
    import tracemalloc

    class _MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                "keepcost",
            )
        ]  # fmt: skip

    _libc = ctypes.CDLL("libc.so.6")
    _libc.mallinfo2.restype = _MallInfo2

    def _rss() -> int:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def _pymalloc() -> list[str]:
        # _debugmallocstats writes to the C stderr: caught on a temporary file descriptor.
        with tempfile.TemporaryFile("w+") as caught:
            saved = os.dup(2)
            sys.stderr.flush()
            os.dup2(caught.fileno(), 2)
            try:
                sys._debugmallocstats()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            caught.seek(0)
            return [line.rstrip() for line in caught if "arena" in line or line.startswith("Total")]

    def _smaps() -> dict[str, int]:
        kib = {}
        with open("/proc/self/smaps_rollup") as rollup:
            for line in rollup:
                parts = line.split()
                if len(parts) >= 3 and parts[-1] == "kB":
                    kib[parts[0].rstrip(":")] = int(parts[1])
        return kib

    def _dump(signum: int, frame: object) -> None:
        began = time.time()
        gc.collect()
        objects = gc.get_objects()
        by_type = collections.Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)
        info = _libc.mallinfo2()
        out = {
            "pid": os.getpid(),
            "t": began,
            "rss": _rss(),
            "gc_objects": len(objects),
            "top": by_type.most_common(40),
            "mallinfo2": {name: getattr(info, name) for name, _ in _MallInfo2._fields_},
            "pymalloc": _pymalloc(),
            "smaps_kib": _smaps(),
        }
        del objects
        out["trimmed"] = _libc.malloc_trim(0)
        out["rss_after_trim"] = _rss()
        if tracemalloc.is_tracing():
            snapshot = tracemalloc.take_snapshot()
            lines = snapshot.statistics("lineno")
            out["traced_total"] = sum(s.size for s in lines)
            out["traced_top"] = [[str(s.traceback[0]), s.size, s.count] for s in lines[:40]]
        out["seconds"] = time.time() - began
        with open(f"{os.environ['MEMDIAG_OUT']}.{os.getpid()}.{int(began)}.json", "w") as written:
            json.dump(out, written)

    signal.signal(signal.SIGUSR2, _dump)
