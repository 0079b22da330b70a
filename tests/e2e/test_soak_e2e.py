"""The soak, short: sessions in the production shape lose nothing under kills, bounces, gc, a rotation and S3 faults.

Runs ``bench/soak.py`` (its docstring says what it does and why the dev
server, not the time-skipping one, is the shape here) at 3 sessions x 6
turns on 2 ``agentsteps worker`` processes that share S3 (moto behind a
faulting proxy) and a key: 2 SIGKILLs, an MCP bounce every round and one
outage past ``give_up_seconds``, one ``payloads gc --delete`` during a round,
one key rotation rollout; a killed worker's runs move to another after 2 s
(``sticky_queue_timeout_seconds``, the SDK's 10 by default). Every figure it
measures is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.soak, pytest.mark.timeout(600)]

BENCH = Path(__file__).parents[2] / "bench" / "soak.py"
SESSIONS, TURNS = 3, 6


def test_sessions_lose_nothing_through_kills_mcp_bounces_gc_a_key_rotation_and_s3_faults(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--sessions",
            str(SESSIONS),
            "--turns",
            str(TURNS),
            "--workers",
            "2",
            "--kills",
            "2",
            "--gc",
            "1",
            "--gc-older-than",
            "6",
            "--s3-fault-rate",
            "0.05",
            # A killed worker's runs move after 2 s, not the SDK's 10: the same move, sooner.
            "--sticky-seconds",
            "2",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=540,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"the soak did not finish:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    f = json.loads(lines[-1])
    context = f"\n{done.stdout[-4000:]}"

    assert f["sessions"] == SESSIONS and f["sessions_lost"] == 0, context
    # Turns failed only where expected, and typed: the outage past give_up_seconds, as McpServerDownError.
    assert f["turns_failed_unexpected"] == [], context
    assert set(f["turns_failed_by_type"]) == {"McpServerDownError"} and f["mcp_outages"] == 1, context
    assert f["turns_failed_while_mcp_down"].get("outage", 0) >= 1, context
    assert f["turns_failed_while_mcp_down"].get("neither", 0) == 0, context
    # Every conversation and every variable intact, asked for at the end.
    assert f["conversations_checked"] == 2 and f["conversations_intact"] == 2, context
    assert f["variables_checked"] == TURNS and f["variables_intact"] == TURNS, context
    # Every effect once: one per session and step, none repeated under another key.
    assert f["effects_expected"] == SESSIONS * TURNS and f["effects_applied"] == f["effects_expected"], context
    # The disturbances happened.
    assert f["kills"] == 2, context
    assert f["gc_runs"] == 1 and f["gc_errors"] == [] and f["gc_deleted"] >= 1, context
    assert f["rotation"]["rollouts"] == 1 and f["rotation"]["workers_replaced"] == 2, context
    faults = f["s3_faults_injected"]
    assert faults["total"] >= 3 and all(faults.get(kind, 0) >= 1 for kind in ("5xx", "reset", "slow")), context
    assert f["mcp_bounces"] >= 3 and f["continued_as_new"] >= SESSIONS, context
