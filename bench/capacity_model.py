"""The capacity model of docs/capacity.md: measured per-turn figures times a month's load, at list prices.

``bench/fleet.py --write`` measures the per-turn figures and writes them to
``bench/capacity.json``; this module turns them into the doc's tables
(per step, per turn, and a month of ``SESSIONS`` sessions of ``TURNS`` turns,
the engine beside the hand-written loop). ``tests/repo/test_capacity_model.py``
fails when the doc's tables differ from what this renders from the JSON, so
the doc always carries the figures the benchmark last measured.

    .venv/bin/python bench/capacity_model.py           # print the tables
    .venv/bin/python bench/capacity_model.py --write   # put them into docs/capacity.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIGURES = HERE / "capacity.json"
DOC = HERE.parent / "docs" / "capacity.md"
BLOCKS = ("capacity-model", "fleet-run")
"""The doc's generated blocks, each between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``."""

SESSIONS = 1_000_000
TURNS = 20
OPEN_DAYS = 7
"""How long a session holds active storage: the default idle timeout, for sessions nobody closes."""
RETENTION_DAYS = 30
"""Temporal's namespace retention after a session closes, and gc's ``--older-than`` for the store."""
PEAK = 3
"""Peak-hour load over the month's average, for the cores to provision."""
HOURS = 730
SECONDS = HOURS * 3600

PRICES = {
    "checked": "2024 (the author's last look; no network here to check again)",
    "temporal_action_usd": 50 / 1e6,
    "temporal_active_gb_hour_usd": 0.042,
    "temporal_retained_gb_hour_usd": 0.00105,
    "s3_put_class_per_1000_usd": 0.005,
    "s3_get_per_1000_usd": 0.0004,
    "s3_gb_month_usd": 0.023,
}
"""List prices as published: Temporal Cloud's entry tier ($50 per million actions; volume tiers are lower), its
active and retained storage per GB-hour; S3 Standard in us-east-1 (PUT, COPY, POST, LIST per 1,000; GET per 1,000;
storage per GB-month)."""

PER_TURN = (
    "billable_actions",
    "history_bytes",
    "s3_put",
    "s3_get",
    "s3_list",
    "store_objects",
    "store_bytes",
    "worker_cpu_ms",
    "server_cpu_ms",
)
SIDES = ("engine", "handwritten")


class FiguresError(ValueError):
    """capacity.json is missing a figure or holds one that is not a non-negative number."""


def load(path: Path = FIGURES) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise FiguresError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise FiguresError(f"{path}: not a JSON object")
    for side in SIDES:
        figures = data.get(side)
        if not isinstance(figures, dict):
            raise FiguresError(f"{path}: no {side!r} figures")
        for key in PER_TURN:
            value = figures.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise FiguresError(f"{path}: {side}.{key} is {value!r}, not a non-negative number")
    steps = data.get("steps_per_turn")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise FiguresError(f"{path}: steps_per_turn is {steps!r}, not a positive integer")
    return data


def month(figures: dict[str, float]) -> dict[str, float]:
    """A month of ``SESSIONS`` sessions of ``TURNS`` turns with these per-turn figures."""
    turns = SESSIONS * TURNS
    history_gb = SESSIONS * TURNS * figures["history_bytes"] / 1e9
    store_gb = turns * figures["store_bytes"] / 1e9
    put = turns * figures["s3_put"]
    get = turns * figures["s3_get"]
    # gc lists the whole store once a day: a LIST page per 1,000 objects kept.
    kept_objects = turns * figures["store_objects"] * (OPEN_DAYS + RETENTION_DAYS) / 30
    listing = turns * figures["s3_list"] + 30 * kept_objects / 1000
    kept_gb = store_gb * (OPEN_DAYS + RETENTION_DAYS) / 30
    p = PRICES
    cores = turns * figures["worker_cpu_ms"] / 1000 / SECONDS
    return {
        "actions_m": turns * figures["billable_actions"] / 1e6,
        "actions_usd": turns * figures["billable_actions"] * p["temporal_action_usd"],
        "history_gb": history_gb,
        "active_usd": history_gb * OPEN_DAYS * 24 * p["temporal_active_gb_hour_usd"],
        "retained_usd": history_gb * RETENTION_DAYS * 24 * p["temporal_retained_gb_hour_usd"],
        "s3_put_m": put / 1e6,
        "s3_get_m": get / 1e6,
        "s3_list_m": listing / 1e6,
        "s3_requests_usd": (put + listing) / 1000 * p["s3_put_class_per_1000_usd"]
        + get / 1000 * p["s3_get_per_1000_usd"],
        "store_gb_kept": kept_gb,
        "s3_storage_usd": kept_gb * p["s3_gb_month_usd"],
        "worker_cores_avg": cores,
        "worker_cores_peak": cores * PEAK,
        "server_cpu_core_hours": turns * figures["server_cpu_ms"] / 1000 / 3600,
        "kept_objects": kept_objects,
    }


def merged(figures: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """``figures`` with the runs of worker counts this run did not measure kept from ``previous`` (each run
    carries its own size and date, so the doc says which is which). Figures that are only runs (no per-turn
    bill: the hand-written loop was not measured beside them) keep ``previous``'s bill."""
    old = previous.get("runs", {}) if isinstance(previous, dict) else {}
    if "engine" not in figures and isinstance(previous, dict):
        figures = {**previous, "runs": figures["runs"]}
    runs = dict(figures["runs"])
    for count, run in old.items() if isinstance(old, dict) else ():
        if count not in runs and isinstance(run, dict):
            runs[count] = {
                **run,
                **{k: run.get(k, previous.get(k)) for k in ("sessions", "concurrent", "measured")},
            }
    return {**figures, "runs": runs}


def _n(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}"


def render(data: dict[str, Any]) -> str:
    steps = data["steps_per_turn"]
    engine, hand = data["engine"], data["handwritten"]
    rows = [
        ("Temporal billable actions", "billable_actions", 2),
        ("history bytes", "history_bytes", 0),
        ("payload-store PUT-class requests (PUT, COPY)", "s3_put", 2),
        ("payload-store GET requests", "s3_get", 2),
        ("payload-store LIST requests", "s3_list", 2),
        ("payload-store objects written", "store_objects", 2),
        ("payload-store bytes written", "store_bytes", 0),
        ("worker CPU, ms", "worker_cpu_ms", 1),
        ("Temporal server CPU, ms", "server_cpu_ms", 1),
    ]
    out = [
        f"Measured by `{data['by']}` on {data['measured']} ({data['sessions']:,} sessions, "
        f"{data['concurrent']} turning at once, one worker; load average {data['load_average'][-1]}); "
        f"a turn is {steps} steps (a tool call, then the answer); bills from one session of "
        f"{data['session_turns']} turns.",
        "",
        "| per turn | engine | per step | hand-written loop |",
        "|---|---:|---:|---:|",
    ]
    for label, key, digits in rows:
        out.append(
            f"| {label} | {_n(engine[key], digits)} | {_n(engine[key] / steps, digits)} | {_n(hand[key], digits)} |"
        )
    ours, theirs = month(engine), month(hand)
    p = PRICES
    out += [
        "",
        f"A month of {SESSIONS:,} sessions of {TURNS} turns ({SESSIONS * TURNS:,} turns), each session open "
        f"{OPEN_DAYS} days and kept {RETENTION_DAYS} days after it closes; prices as published, checked "
        f"{p['checked']}: Temporal Cloud ${p['temporal_action_usd'] * 1e6:g} per million actions (entry tier), "
        f"${p['temporal_active_gb_hour_usd']} per GB-hour active and ${p['temporal_retained_gb_hour_usd']} retained "
        f"storage; S3 Standard us-east-1 ${p['s3_put_class_per_1000_usd']} per 1,000 PUT/COPY/LIST, "
        f"${p['s3_get_per_1000_usd']} per 1,000 GET, ${p['s3_gb_month_usd']} per GB-month.",
        "",
        "| a month | engine | hand-written loop |",
        "|---|---:|---:|",
        f"| Temporal actions | {_n(ours['actions_m'], 1)} M: ${_n(ours['actions_usd'])} "
        f"| {_n(theirs['actions_m'], 1)} M: ${_n(theirs['actions_usd'])} |",
        f"| Temporal history written | {_n(ours['history_gb'], 1)} GB | {_n(theirs['history_gb'], 1)} GB |",
        f"| Temporal storage, active + retained | ${_n(ours['active_usd'])} + ${_n(ours['retained_usd'])} "
        f"| ${_n(theirs['active_usd'])} + ${_n(theirs['retained_usd'])} |",
        f"| S3 requests (PUT-class, GET, LIST) | {_n(ours['s3_put_m'], 1)} M, {_n(ours['s3_get_m'], 1)} M, "
        f"{_n(ours['s3_list_m'], 2)} M: ${_n(ours['s3_requests_usd'])} | none |",
        f"| S3 storage kept | {_n(ours['store_gb_kept'], 1)} GB: ${_n(ours['s3_storage_usd'], 2)} | none |",
        f"| worker cores, average (peak x{PEAK}) | {_n(ours['worker_cores_avg'], 2)} "
        f"({_n(ours['worker_cores_peak'], 1)}) | {_n(theirs['worker_cores_avg'], 2)} "
        f"({_n(theirs['worker_cores_peak'], 1)}) |",
        f"| Temporal server CPU (self-hosted), core-hours | {_n(ours['server_cpu_core_hours'])} "
        f"| {_n(theirs['server_cpu_core_hours'])} |",
    ]
    rate = engine.get("gc_objects_per_s")
    if isinstance(rate, (int, float)) and rate > 0:
        out += [
            "",
            "`payloads gc` lists the store (a LIST per 1,000 objects), reads every open session's history, GETs "
            "each object still reachable to follow what it names, and deletes the rest a page at a time (a LIST "
            f"and a DeleteObjects per up to 1,000): at the measured {_n(rate, 1)} objects examined a second "
            f"(moto on this machine, 16 requests at once), a daily run over the "
            f"{_n(ours['kept_objects'] / 1e6, 1)} million objects kept takes "
            f"{_n(ours['kept_objects'] / rate / 3600, 1)} hours, against a store growing "
            f"{_n(SESSIONS * TURNS * engine['store_objects'] / SECONDS, 1)} objects a second on average: "
            + (
                "it keeps up."
                if ours["kept_objects"] / rate < 86400
                else "it keeps up with the growth but a sweep does not fit a day in one process: run it back to "
                "back (garbage then waits a sweep longer than `--older-than`) or one gc per deployment prefix at "
                "once (see below)."
                if rate > SESSIONS * TURNS * engine["store_objects"] / SECONDS
                else "it does not keep up (see below)."
            ),
        ]
    return "\n".join(out)


RUN_ROWS = (
    ("sessions opened (each with its first turn) / opens a second", ("sessions", "opens_per_s"), "{:,.1f}"),
    ("sessions in the rounds (an evicted turn, then a cached one)", "rounds_sessions", "{:,.0f}"),
    ("sessions' turns a second (rounds)", "turns_per_s", "{:,.2f}"),
    ("turn latency, cached: p50 / p99 ms", ("cached_p50_ms", "cached_p99_ms"), "{:,.0f}"),
    ("turn latency, evicted (replayed): p50 / p99 ms", ("evicted_p50_ms", "evicted_p99_ms"), "{:,.0f}"),
    ("one at a time, no load: cached / evicted p50 ms", ("quiet_cached_p50_ms", "quiet_evicted_p50_ms"), "{:,.0f}"),
    ("sticky-cache misses per evicted turn", "misses_per_evicted_turn", "{:,.2f}"),
    ("replay time per rebuild, ms", "replay_ms_per_rebuild", "{:,.2f}"),
    ("sessions continued as new during the rounds", "continued_as_new", "{:,.0f}"),
    ("worker RSS per cached session, KiB", "rss_per_cached_session_kib", "{:,.0f}"),
    (
        "worker RSS at start / every session closed / after a second batch, MiB",
        ("rss_start_mib", "rss_closed_mib", "rss_after_second_batch_mib"),
        "{:,.0f}",
    ),
    ("runs left in the caches after close", "cached_after_close", "{:,.0f}"),
    ("turns failed or lost", "turns_failed", "{:,.0f}"),
    ("payloads gc: objects examined a second (open sessions)", ("gc_examined_per_s", "gc_open_sessions"), "{:,.1f}"),
    ("payloads gc: objects deleted a second", "gc_deleted_per_s", "{:,.1f}"),
    ("store growth at the measured turn rate, objects a second", "store_growth_objects_per_s", "{:,.2f}"),
    (
        "objects gc deleted / open sessions' turns failed after it",
        ("gc_deleted", "live_turns_failed_after_gc"),
        "{:,.0f}",
    ),
)


def _cell(run: dict[str, Any], keys: str | tuple[str, ...], fmt: str) -> str:
    names = (keys,) if isinstance(keys, str) else keys
    values = [run.get(k) for k in names]
    if keys == ("gc_examined_per_s", "gc_open_sessions"):
        return f"{fmt.format(values[0])} ({values[1]:,})"
    if keys == ("sessions", "opens_per_s"):
        return " / ".join("n/a" if v is None else f"{v:,}" if i == 0 else fmt.format(v) for i, v in enumerate(values))
    return " / ".join("n/a" if v is None else fmt.format(v) for v in values)


def render_run(data: dict[str, Any]) -> str:
    runs = data.get("runs")
    if not isinstance(runs, dict) or not runs:
        raise FiguresError("capacity.json has no 'runs' figures")
    counts = sorted(runs, key=int)

    def column(c: str) -> str:
        run = runs[c]
        name = f"{c} worker{'s' if c != '1' else ''}"
        if "sessions" not in run:
            return name
        return f"{name}: {run['sessions']:,} sessions, {run.get('concurrent', data['concurrent'])} at once"

    head = "| | " + " | ".join(column(c) for c in counts) + " |"
    dates = sorted({str(runs[c].get("measured", data["measured"])) for c in counts})
    out = [
        "`max_cached_workflows` "
        + ", ".join(f"{runs[c]['max_cached_workflows']} ({c} worker{'s' if c != '1' else ''})" for c in counts)
        + f"; measured {' and '.join(dates)}; load average of the shared 2-core machine during the latest run"
        + f" {data['load_average']}.",
        "",
        head,
        "|---|" + "---:|" * len(counts),
    ]
    for label, keys, fmt in RUN_ROWS:
        out.append(f"| {label} | " + " | ".join(_cell(runs[c], keys, fmt) for c in counts) + " |")
    return "\n".join(out)


RENDER = {"capacity-model": render, "fleet-run": render_run}


def block(data: dict[str, Any], name: str = "capacity-model") -> str:
    return f"<!-- {name}:begin -->\n{RENDER[name](data)}\n<!-- {name}:end -->"


def in_doc(text: str, name: str = "capacity-model") -> str:
    """The generated block ``name`` as it stands in the doc (markers included)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise FiguresError(f"{DOC} has no {begin} ... {end} block")
    return text[start : stop + len(end)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"replace the block in {DOC.name}")
    args = parser.parse_args(argv)
    data = load()
    if args.write:
        text = DOC.read_text()
        for name in BLOCKS:
            text = text.replace(in_doc(text, name), block(data, name))
        DOC.write_text(text)
    else:
        print("\n\n".join(RENDER[name](data) for name in BLOCKS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
