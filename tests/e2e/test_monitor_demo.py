"""The demo's monitor tick: a fresh tracker, the offline scripted model, a printed report."""

from __future__ import annotations

import io

from monitor_support import assignee_of, nudge_comments

from agentsteps.demos.monitor import demo_monitor_tick
from agentsteps.workflows.monitor.nudges import NUDGE_MARKER


async def test_the_demo_tick_nudges_stalled_issues_offline_and_prints_its_report(client, settings):
    out = io.StringIO()
    report = await demo_monitor_tick(client, settings, out=out, issues=200)
    text = out.getvalue()

    assert report.stalled_ids and report.nudged
    assert report.failed == [] and report.template_nudges == [] and report.reprompts == 0
    assert len(report.nudged) == min(len(report.stalled_ids), 8)
    assert f"{len(report.stalled_ids)} stalled, {len(report.nudged)} nudged" in text
    assert "sample nudge on" in text and NUDGE_MARKER in text
    [db] = (settings.state_dir / "monitor-demo").glob("tickets-*.db")
    nudges = nudge_comments(db)
    assert sorted(nudges) == sorted(report.nudged)
    assert all(f"@{assignee_of(db, i)}" in bodies[0] for i, bodies in nudges.items())
