"""A worker SIGKILLed mid-tick: the tick finishes on a new worker with exactly one nudge per issue."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from mcp_support import new_token
from monitor_support import make_spec, nudge_comments, seed_tracker, stalled_by_sql
from process_support import STICKY_AFTER_KILL, kill, start_worker_process, wait_for

from agentsteps.contracts.monitor import MonitorInput, MonitorReport
from agentsteps.contracts.names import MONITOR_WORKFLOW
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.demos.monitor import assigned_issues, nudge_script

WORKER = Path(__file__).parents[1] / "support" / "monitor_support.py"


async def test_sigkilled_worker_mid_tick_leaves_exactly_one_nudge_comment_per_stalled_issue(
    temporal_env, client, scripted, tmp_path
):
    # 24 issues, 12 of them stalled: enough that the kill lands mid-tick, few enough that the tick is short.
    db, now = seed_tracker(tmp_path, issues=24)
    script = nudge_script(assigned_issues(db))
    for rule in script["rules"]:
        rule["reply"]["delay_seconds"] = 0.3  # drafts are slow enough that the kill lands mid-tick
    scripted.set_script(script)
    spec = make_spec(
        draft_concurrency=1,
        llm_policy=ActivityPolicy(start_to_close_seconds=3, initial_interval_seconds=0.2),
        tool_policy=ActivityPolicy(start_to_close_seconds=8, initial_interval_seconds=0.2),
    )
    expected = stalled_by_sql(db, spec, now)
    assert len(expected) >= 5

    address = temporal_env.client.service_client.config.target_host
    task_queue = f"monitor-kill-{uuid.uuid4().hex[:8]}"
    token = new_token()
    state_dir = tmp_path / "state"
    first = start_worker_process(
        WORKER,
        address,
        task_queue,
        scripted.url_openai,
        state_dir,
        db,
        env={"TICKETS_TOKEN": token, **STICKY_AFTER_KILL},
    )
    handle = await client.start_workflow(
        MONITOR_WORKFLOW,
        MonitorInput(spec=spec, as_of=now),
        id=f"monitor-kill-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=MonitorReport,
    )
    second = None
    try:
        await wait_for(lambda: len(nudge_comments(db, spec.author)) >= 2)
        kill(first)
        posted_before_kill = len(nudge_comments(db, spec.author))
        assert posted_before_kill < len(expected), "the kill should land before the tick is done"
        second = start_worker_process(
            WORKER, address, task_queue, scripted.url_openai, state_dir, db, env={"TICKETS_TOKEN": token}
        )
        report = await asyncio.wait_for(handle.result(), timeout=120)
    finally:
        for proc in (first, second):
            if proc is not None:
                kill(proc)

    assert report.stalled_ids == expected
    assert sorted(report.nudged) == sorted(expected)
    nudges = nudge_comments(db, spec.author)
    assert sorted(nudges) == sorted(expected)
    assert {issue_id: len(bodies) for issue_id, bodies in nudges.items()} == {i: 1 for i in expected}
