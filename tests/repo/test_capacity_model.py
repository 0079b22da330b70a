"""docs/capacity.md carries the per-turn figures ``bench/fleet.py`` last measured, and the model built on them.

``bench/fleet.py --write`` writes ``bench/capacity.json``; ``bench/capacity_model.py --write`` renders the
doc's tables from it. The doc's generated block must be exactly that rendering, so a new measurement that
is not carried into the doc (or a hand edit of a figure) fails here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import capacity_model  # noqa: E402

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("block", capacity_model.BLOCKS)
def test_capacity_doc_carries_the_figures_the_fleet_benchmark_last_measured(block):
    figures = capacity_model.load()
    doc = capacity_model.DOC.read_text()
    assert capacity_model.in_doc(doc, block) == capacity_model.block(figures, block), (
        "run bench/capacity_model.py --write"
    )


def test_every_per_turn_figure_of_both_sides_is_in_the_doc_table():
    figures = capacity_model.load()
    table = capacity_model.in_doc(capacity_model.DOC.read_text())
    for side in capacity_model.SIDES:
        for key in ("billable_actions", "worker_cpu_ms", "server_cpu_ms"):
            digits = 2 if key == "billable_actions" else 1
            assert f"{figures[side][key]:,.{digits}f}" in table, (side, key)


def test_a_month_is_the_per_turn_figures_times_a_million_sessions_of_twenty_turns():
    one = {key: 0.0 for key in capacity_model.PER_TURN}
    one["billable_actions"] = 1.0
    one["worker_cpu_ms"] = 1000.0
    month = capacity_model.month(one)
    turns = capacity_model.SESSIONS * capacity_model.TURNS
    assert month["actions_m"] == turns / 1e6
    assert month["actions_usd"] == pytest.approx(turns * 50 / 1e6)
    assert month["worker_cores_avg"] == pytest.approx(turns / capacity_model.SECONDS)
    assert month["s3_requests_usd"] == 0 and month["store_gb_kept"] == 0


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda d: d["engine"].pop("s3_put"), "engine.s3_put"),
        (lambda d: d["handwritten"].update(worker_cpu_ms="fast"), "handwritten.worker_cpu_ms"),
        (lambda d: d["engine"].update(history_bytes=-1), "engine.history_bytes"),
        (lambda d: d["engine"].update(store_bytes=True), "engine.store_bytes"),
        (lambda d: d.pop("handwritten"), "'handwritten'"),
        (lambda d: d.update(steps_per_turn=0), "steps_per_turn"),
    ],
)
def test_malformed_figures_are_refused_naming_the_figure(tmp_path, change, named):
    data = json.loads(capacity_model.FIGURES.read_text())
    change(data)
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(data))
    with pytest.raises(capacity_model.FiguresError, match=named.replace(".", r"\.")):
        capacity_model.load(path)


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"engine": 3}'])
def test_a_figures_file_that_is_not_an_object_of_figures_is_refused(tmp_path, text):
    path = tmp_path / "capacity.json"
    path.write_text(text)
    with pytest.raises(capacity_model.FiguresError):
        capacity_model.load(path)


def test_a_run_not_measured_again_keeps_its_figures_and_says_its_own_size_and_date():
    previous = {
        "measured": "2026-12-01",
        "sessions": 400,
        "concurrent": 60,
        "runs": {"1": {"turns_per_s": 5.0}, "3": {"turns_per_s": 4.4}},
    }
    new = {"measured": "2026-12-06", "sessions": 10_000, "concurrent": 200, "runs": {"1": {"turns_per_s": 6.0}}}
    runs = capacity_model.merged(new, previous)["runs"]
    assert runs["1"] == {"turns_per_s": 6.0}, "a run measured again replaces the old one"
    assert runs["3"] == {"turns_per_s": 4.4, "sessions": 400, "concurrent": 60, "measured": "2026-12-01"}
    assert capacity_model.merged(new, "not figures")["runs"] == {"1": {"turns_per_s": 6.0}}


def test_a_run_without_the_hand_written_loop_adds_its_rows_and_keeps_the_per_turn_bill():
    previous = {
        "measured": "2026-12-01",
        "sessions": 10_000,
        "engine": {"worker_cpu_ms": 48.6},
        "handwritten": {"worker_cpu_ms": 24.8},
        "runs": {"1": {"turns_per_s": 5.0}},
    }
    merged = capacity_model.merged({"runs": {"3": {"turns_per_s": 4.4}}}, previous)
    assert merged["engine"] == {"worker_cpu_ms": 48.6} and merged["handwritten"] == {"worker_cpu_ms": 24.8}
    assert merged["measured"] == "2026-12-01", "the bill keeps the date it was measured"
    assert merged["runs"]["3"] == {"turns_per_s": 4.4}
    assert merged["runs"]["1"]["turns_per_s"] == 5.0
