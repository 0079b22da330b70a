"""The stalled-ticket monitor end to end: real dev server, real tracker (stdio and HTTP), scripted model."""

from __future__ import annotations

import json
import uuid
from datetime import date, timedelta
from typing import Any

import pytest
from mcp_support import free_port, http_tracker_process, new_token
from monitor_support import (
    assignee_of,
    make_spec,
    nudge_comments,
    run_tick,
    seed_tracker,
    sql,
    stalled_by_sql,
)
from secret_scan import SecretScan, decoded_payloads

from agentsteps.contracts.monitor import MonitorInput, MonitorReport, StalledIssue
from agentsteps.contracts.names import MONITOR_WORKFLOW
from agentsteps.contracts.violations import ViolationKind
from agentsteps.demos.monitor import assigned_issues, monitor_worker, nudge_script, tracker_client, tracker_server
from agentsteps.telemetry.metrics import MONITOR_ESCALATIONS, MONITOR_NUDGES, MONITOR_STALLED_TICKETS
from agentsteps.workflows.monitor.nudges import NUDGE_MARKER, check_nudge, plan_action


@pytest.fixture
def tracker(tmp_path):
    return seed_tracker(tmp_path, issues=40)


@pytest.fixture(params=["stdio", "http"])
async def mcp(request, tracker):
    db, _ = tracker
    token = new_token()
    if request.param == "stdio":
        client = tracker_client({"tickets": tracker_server(db)}, token)
        client.test_token = token
        yield client
        await client.aclose()
        return
    port = free_port()
    with http_tracker_process(db, port, token):
        server = {
            "transport": "http",
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": "Bearer ${secret:TICKETS_API_TOKEN}"},
        }
        client = tracker_client({"tickets": server}, token)
        client.test_token = token
        yield client
        await client.aclose()


async def _tick_with_history(client, task_queue, spec, as_of) -> tuple[MonitorReport, Any]:
    handle = await client.start_workflow(
        MONITOR_WORKFLOW,
        MonitorInput(spec=spec, as_of=as_of),
        id=f"monitor-{uuid.uuid4().hex[:10]}",
        task_queue=task_queue,
        result_type=MonitorReport,
    )
    report = await handle.result()
    return report, await handle.fetch_history()


def _metric(metric, name: str) -> float:
    return metric.labels(monitor=name)._value.get()


async def test_a_tick_nudges_exactly_the_stalled_issues_and_a_second_tick_the_same_day_posts_nothing(
    client, settings, scripted, tracker, mcp
):
    db, now = tracker
    scripted.set_script(nudge_script(assigned_issues(db)))
    spec = make_spec()
    expected = stalled_by_sql(db, spec, now)
    assert 3 <= len(expected) < spec.max_actions_per_tick, "the seed should give a handful of stalled issues"

    async with monitor_worker(client, settings, mcp):
        report, history = await _tick_with_history(client, settings.task_queue, spec, now)
        comments_after_first = sql(db, "SELECT COUNT(*) FROM comments")[0][0]
        again = await run_tick(client, settings.task_queue, spec, now)

    assert report.stalled_ids == expected
    assert report.nudged == expected
    assert report.failed == [] and report.escalated == []
    nudges = nudge_comments(db, spec.author)
    assert sorted(nudges) == sorted(expected)
    for issue_id, bodies in nudges.items():
        assert len(bodies) == 1
        assert f"@{assignee_of(db, issue_id)}" in bodies[0]
        assert bodies[0].endswith(f"<!-- {NUDGE_MARKER} {now.date().isoformat()} -->")
    # The model read one short prompt per issue, never a page of tracker JSON.
    assert len(scripted.requests) == len(expected)
    assert all(len(json.dumps(r.body)) < 3_000 for r in scripted.requests)
    assert report.scan_tool_calls >= 1 + len(expected)  # at least one page, then one get_issue per candidate
    # The tracker's token is a worker secret: not in history, not in any prompt.
    decoded = "\n".join(decoded_payloads(history.to_json_dict()))
    assert "list_issues" in decoded and expected[0] in decoded  # the scan reads what history really holds
    SecretScan(mcp.test_token).history(history).requests(scripted.requests).assert_clean()

    # Nudging bumped updated_at, as real trackers do: nothing is stalled any more, nothing new is posted.
    assert again.nudged == [] and again.escalated == []
    assert sorted(again.stalled_ids) == sorted(set(expected) - set(report.nudged))
    assert sql(db, "SELECT COUNT(*) FROM comments")[0][0] == comments_after_first
    assert _metric(MONITOR_STALLED_TICKETS, spec.name) == len(again.stalled_ids)
    assert _metric(MONITOR_NUDGES, spec.name) == len(expected)


async def test_later_ticks_nudge_again_skip_issues_nudged_today_and_escalate_after_m_nudges(
    client, settings, scripted, tmp_path
):
    db, now = seed_tracker(tmp_path, issues=40)
    scripted.set_script(nudge_script(assigned_issues(db)))
    spec = make_spec(escalate_after_nudges=2)
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    # Noon, so that five minutes later is still the same day whatever time the test runs.
    day2 = (now + timedelta(days=spec.stalled_after_days + 1)).replace(hour=12, minute=0, second=0)
    day3 = day2 + timedelta(days=spec.stalled_after_days + 1)
    try:
        async with monitor_worker(client, settings, mcp):
            first = await run_tick(client, settings.task_queue, spec, now)
            # A week later every open, assigned issue is stalled: the first ones get their second nudge.
            expected_day2 = stalled_by_sql(db, spec, day2)
            second = await run_tick(client, settings.task_queue, spec, day2)
            comments = sql(db, "SELECT COUNT(*) FROM comments")[0][0]
            # Same day again: the issues are still stalled (the tracker's clock is behind day2), but the
            # marker says they were nudged today.
            repeat = await run_tick(client, settings.task_queue, spec, day2 + timedelta(minutes=5))
            assert sql(db, "SELECT COUNT(*) FROM comments")[0][0] == comments
            third = await run_tick(client, settings.task_queue, spec, day3)
    finally:
        await mcp.aclose()

    assert first.nudged and first.escalated == []
    assert second.stalled_ids == expected_day2
    assert sorted(second.nudged) == sorted(expected_day2)
    assert repeat.nudged == [] and sorted(repeat.nudged_today) == sorted(expected_day2)

    twice = sorted(first.nudged)
    assert sorted(third.escalated) == twice
    assert sorted(third.nudged) == sorted(set(expected_day2) - set(twice))
    for issue_id in twice:
        assignee, labels = sql(db, "SELECT assignee, labels FROM issues WHERE id = ?", issue_id)[0]
        assert assignee == spec.lead
        assert spec.escalation_label in json.loads(labels)
        assert len(nudge_comments(db, spec.author)[issue_id]) == spec.escalate_after_nudges
    assert _metric(MONITOR_ESCALATIONS, spec.name) == len(twice)

    # Escalated issues are the lead's now: a later tick leaves them alone.
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    try:
        async with monitor_worker(client, settings, mcp):
            fourth = await run_tick(client, settings.task_queue, spec, day3 + timedelta(days=8))
    finally:
        await mcp.aclose()
    assert sorted(fourth.already_escalated) == twice
    assert not set(fourth.escalated) & set(twice)


async def test_a_nudge_that_does_not_name_the_assignee_is_reprompted_with_the_violation(
    client, settings, scripted, tmp_path
):
    db, now = seed_tracker(tmp_path, issues=40)
    spec = make_spec()
    stalled = stalled_by_sql(db, spec, now)
    target = stalled[0]
    scripted.set_script(nudge_script(assigned_issues(db), off_contract_first=[target]))
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    try:
        async with monitor_worker(client, settings, mcp):
            report = await run_tick(client, settings.task_queue, spec, now)
    finally:
        await mcp.aclose()

    assert report.reprompts == 1
    [violation] = report.violations
    assert violation.kind == ViolationKind.predicate_failed and violation.path == "$.content.message"
    assert assignee_of(db, target) in violation.message
    assert target in report.nudged and report.template_nudges == []
    [body] = nudge_comments(db, spec.author)[target]
    assert f"@{assignee_of(db, target)}" in body
    # The re-prompt carried the exact violation text to the model.
    reprompts = [r for r in scripted.requests if "broke the response contract" in json.dumps(r.body)]
    assert len(reprompts) == 1 and violation.message in json.dumps(reprompts[0].body)


async def test_drafts_that_never_meet_the_contract_fall_back_to_the_template_naming_the_assignee(
    client, settings, scripted, tmp_path
):
    db, now = seed_tracker(tmp_path, issues=40)
    spec = make_spec(reprompt_budget=1)
    stalled = stalled_by_sql(db, spec, now)
    scripted.set_script({"default": {"json": {"issue_id": "nope", "message": "please look"}}})
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    try:
        async with monitor_worker(client, settings, mcp):
            report = await run_tick(client, settings.task_queue, spec, now)
    finally:
        await mcp.aclose()
    assert report.nudged == stalled and report.template_nudges == stalled
    assert report.reprompts == len(stalled)
    for issue_id, [body] in nudge_comments(db, spec.author).items():
        assert f"@{assignee_of(db, issue_id)}" in body


def test_the_nudge_contract_wants_the_issue_id_and_the_assignee_by_name_and_no_marker():
    issue = StalledIssue(id="PROJ-7", assignee="bob", updated_at="2026-01-01T00:00:00Z")
    assert check_nudge({"issue_id": "PROJ-7", "message": "Hi @bob, any news?"}, issue) == []
    assert check_nudge({"issue_id": "PROJ-7", "message": "Bob: any news?"}, issue) == []
    [wrong_id] = check_nudge({"issue_id": "PROJ-8", "message": "hi bob"}, issue)
    assert wrong_id.path == "$.content.issue_id"
    # "bobby" is someone else.
    [unnamed] = check_nudge({"issue_id": "PROJ-7", "message": "hi bobby, any news?"}, issue)
    assert unnamed.path == "$.content.message" and "'bob'" in unnamed.message
    [forged] = check_nudge({"issue_id": "PROJ-7", "message": f"bob <!-- {NUDGE_MARKER} 2020-01-01 -->"}, issue)
    assert "marker" in forged.message


def test_plan_nudges_once_a_day_escalates_after_m_nudges_and_leaves_escalated_issues_alone():
    spec = make_spec(escalate_after_nudges=2)
    today = date(2026, 3, 2)

    def issue(**kw):
        return StalledIssue(id="P-1", assignee="bob", updated_at="2026-01-01T00:00:00Z", **kw)

    assert plan_action(issue(), spec, today) == "nudge"
    assert plan_action(issue(nudges=1, last_nudge="2026-02-20"), spec, today) == "nudge"
    assert plan_action(issue(nudges=1, last_nudge="2026-03-02"), spec, today) == "nudged_today"
    assert plan_action(issue(nudges=2, last_nudge="2026-02-25"), spec, today) == "escalate"
    assert plan_action(issue(nudges=5, labels=["escalated"]), spec, today) == "already_escalated"


async def test_a_tracker_answering_in_prose_ends_the_tick_typed_and_quickly(client, settings, scripted, tmp_path):
    """A plain-text MCP result reaches the scan program as a string, never an unguarded json.loads."""
    import asyncio

    from mcp_support import hostile, make_client
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    mcp = make_client({"tracker": hostile(env={"HOSTILE_MARKER": str(tmp_path / "m")})}, {})
    try:
        async with monitor_worker(client, settings, mcp):
            with pytest.raises(WorkflowFailureError) as info:
                await asyncio.wait_for(run_tick(client, settings.task_queue, make_spec(), None), timeout=60)
    finally:
        await mcp.aclose()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "MonitorScanError"
    assert "scan program failed" in cause.message


async def test_monitor_record_failing_is_retried_then_reported_in_bounded_time(
    client, settings, scripted, tracker, monkeypatch
):
    import asyncio

    from temporalio import activity

    from agentsteps import worker as worker_module
    from agentsteps.activities.monitor.activities import MonitorActivities
    from agentsteps.contracts.names import MONITOR_RECORD

    attempts: list[int] = []

    class BrokenMetrics(MonitorActivities):
        """Fault injection: the metrics backend is down for every attempt."""

        @activity.defn(name=MONITOR_RECORD)
        async def record(self, metrics) -> None:  # noqa: ANN001
            attempts.append(activity.info().attempt)
            raise RuntimeError("metrics backend unavailable")

    monkeypatch.setattr(worker_module, "MonitorActivities", BrokenMetrics)
    db, now = tracker
    scripted.set_script(nudge_script(assigned_issues(db)))
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    try:
        async with monitor_worker(client, settings, mcp):
            report = await asyncio.wait_for(run_tick(client, settings.task_queue, make_spec(), now), timeout=90)
    finally:
        await mcp.aclose()
    assert report.nudged, "the tick's work stands"
    assert attempts == [1, 2, 3, 4]
    assert report.metrics_error and "metrics backend unavailable" in report.metrics_error
