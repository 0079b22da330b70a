"""How fast ``agentsteps`` answers ``--version`` and ``--help``, and what it imports to do so.

Each command runs as the console script does (``from agentsteps.cli import main``)
in a fresh interpreter, ``--rounds`` times, interleaved with two baselines of the
same round: a bare interpreter (``python -c pass``, the floor) and
``import agentsteps.worker`` (what building the parser imported before the
parser had its own light module). Wall times are medians; ``python -X
importtime`` gives each command's top cumulative imports and the modules it
loaded. The last line is JSON.

    python bench/cli_startup.py --rounds 15
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CLI = "from agentsteps.cli import main; main()"
COMMANDS: dict[str, list[str]] = {
    "--version": ["--version"],
    "--help": ["--help"],
    "fork --help": ["fork", "--help"],
    "run --help": ["run", "--help"],
    "replay --help": ["replay", "--help"],
    "schedule --help": ["schedule", "--help"],
}
BASELINES: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "import agentsteps.worker": ["-c", "import agentsteps.worker"],
}
WATCHED = ("temporalio.worker", "temporalio.client", "anthropic", "openai", "mcp", "pydantic", "agentsteps.worker")


def _wall(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], capture_output=True, check=True)
    return time.perf_counter() - started


def _imports(args: list[str], top: int) -> dict[str, object]:
    """``-X importtime``: the slowest top-level imports (cumulative µs) and which watched packages loaded."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, check=True)
    rows = []  # (cumulative µs, name, depth)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, named = line.split("|")
        name = named.strip()
        rows.append((int(cumulative), name, len(named) - len(named.lstrip())))
    outermost = min((depth for _, _, depth in rows), default=0)
    tops = sorted(((c, n) for c, n, depth in rows if depth == outermost), reverse=True)
    names = {n for _, n, _ in rows}
    return {
        "modules": len(rows),
        "imports_ms": round(sum(c for c, _ in tops) / 1000, 1),
        "top_ms": {name: round(c / 1000, 1) for c, name in tops[:top]},
        "loaded": sorted(w for w in WATCHED if w in names),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--top", type=int, default=5, help="how many top-level imports to show per command")
    options = parser.parse_args()

    runs: dict[str, list[str]] = {
        **BASELINES,
        **{name: ["-c", CLI, *argv] for name, argv in COMMANDS.items()},
    }
    walls: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(options.rounds):  # interleaved: a busy moment slows every command of its round alike
        for name, args in runs.items():
            walls[name].append(_wall(args))
    floor = statistics.median(walls["python -c pass"])
    report = {}
    for name, args in runs.items():
        median = statistics.median(walls[name])
        report[name] = {
            "wall_s": round(median, 3),
            "wall_range_s": [round(min(walls[name]), 3), round(max(walls[name]), 3)],
            "over_bare_python_s": round(median - floor, 3),
            **_imports(args, options.top),
        }
        print(f"{name:28} {median * 1000:7.0f} ms  (+{(median - floor) * 1000:.0f} ms over python)", flush=True)
    worker = statistics.median(walls["import agentsteps.worker"])
    summary = {
        "rounds": options.rounds,
        "slowest_help_or_version_s": round(max(statistics.median(walls[n]) for n in COMMANDS), 3),
        "version_over_import_worker": round(statistics.median(walls["--version"]) / worker, 3),
    }
    print(json.dumps({"bench": "cli_startup", "summary": summary, "commands": report}))


if __name__ == "__main__":
    main()
