"""Contract checks and violations are counted on every path, with one denominator.

A workload crosses each path where a contract is checked and broken once:
the LLM call (``llm.call``), a code-mode program (``code.program``), a
pipeline edge (``reply``) and the monitor's nudge (``monitor.nudge``).
The worker's ``/metrics`` is then scraped over HTTP: every path shows checks
and violations, each contract's failure rate (violations / checks) is within
[0, 1], and the re-prompts each path took are counted.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

from agent_support import MODEL, make_spec, run_agent
from mcp_support import new_token
from monitor_support import make_spec as monitor_spec
from monitor_support import run_tick, seed_tracker, stalled_by_sql
from prometheus_client.parser import text_string_to_metric_families

from agentsteps.client.pipeline_files import load_pipeline_file
from agentsteps.contracts import LLMConfig
from agentsteps.contracts.composition.pipeline_run import PipelineResult, pipeline_input
from agentsteps.contracts.names import PIPELINE_WORKFLOW
from agentsteps.demos.monitor import assigned_issues, monitor_worker, nudge_script, tracker_client, tracker_server
from agentsteps.examples.support_tools import build_registry as support_registry
from agentsteps.telemetry.runtime import collector_for
from agentsteps.telemetry.server import start_metrics_server
from agentsteps.worker import running_worker

PIPELINE = Path(__file__).resolve().parents[2] / "examples" / "pipelines" / "support_reply.toml"
PATHS = {"llm.call", "code.program", "reply", "monitor.nudge"}


def _once_then(first: dict, then: dict, match: dict | None = None) -> dict:
    match = match or {"role": "user"}
    return {"rules": [{"match": match, "reply": first, "times": 1}, {"match": match, "reply": then}]}


async def _tool_loop_with_a_bad_tool_call(client, settings, scripted):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": 5}}]},
                },
                {"match": {"role": "tool"}, "reply": {"content": "done"}},  # the re-prompt answers the broken call
            ]
        }
    )
    async with running_worker(client, settings):
        result = await run_agent(client, settings.task_queue, make_spec())
    assert result.status == "completed" and result.violations


async def _code_mode_with_a_failing_program(client, settings, scripted):
    scripted.set_script(
        _once_then({"content": "```python\nraise ValueError('boom')\n```"}, {"content": "```python\n1 + 1\n```"})
    )
    async with running_worker(client, settings):
        result = await run_agent(client, settings.task_queue, make_spec(mode="code", tools=["get_weather"]))
    assert result.status == "completed" and result.output == 2


async def _pipeline_with_a_broken_edge(client, settings, scripted):
    update = {"issue_id": "PROJ-1", "state": "closed", "comment": "Customer confirms the fix."}
    reply = {"issue_id": "PROJ-1", "state": "closed", "message": "Thanks! Ticket PROJ-1 is now closed."}
    silent = {**reply, "message": "Thanks, all done."}  # breaks the edge's post predicate: names no ticket
    scripted.set_script(
        {
            "rules": [
                {"match": {"any_contains": "triage customer emails"}, "reply": {"json": update}},
                *_once_then({"json": silent}, {"json": reply}, {"any_contains": "friendly reply"})["rules"],
            ]
        }
    )
    loaded = load_pipeline_file(PIPELINE)
    inp = pipeline_input(
        loaded.spec,
        loaded.contracts,
        {"sender": "kim@example.com", "subject": "PROJ-1", "body": "Please close PROJ-1, it works now."},
    )
    for step in inp.steps:
        if step.model is not None:
            step.model = LLMConfig(model=MODEL, max_tokens=256, context_window=16_000)
    async with running_worker(client, settings, registry=support_registry(settings)):
        result = await client.execute_workflow(
            PIPELINE_WORKFLOW,
            inp,
            id=f"pipe-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=PipelineResult,
        )
    assert result.status == "completed" and any(e.violations for e in result.edges)


async def _monitor_with_an_off_contract_nudge(client, settings, scripted, tmp_path):
    db, now = seed_tracker(tmp_path, issues=40)
    spec = monitor_spec()
    target = stalled_by_sql(db, spec, now)[0]
    scripted.set_script(nudge_script(assigned_issues(db), off_contract_first=[target]))
    mcp = tracker_client({"tickets": tracker_server(db)}, new_token())
    try:
        async with monitor_worker(client, settings, mcp):
            report = await run_tick(client, settings.task_queue, spec, now)
    finally:
        await mcp.aclose()
    assert report.reprompts == 1


def _scrape(url: str) -> dict[str, list]:
    collector = collector_for()
    assert collector is not None
    collector.drain()  # workflow-side counts reach the shared counters before the scrape reads them
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def _by(samples: list, *labels: str, **where: str) -> dict[tuple, float]:
    out: dict[tuple, float] = {}
    for s in samples:
        if all(s.labels.get(k) == v for k, v in where.items()):
            key = tuple(s.labels.get(label, "") for label in labels)
            out[key] = out.get(key, 0.0) + s.value
    return out


async def test_every_path_counts_checks_and_violations_with_one_denominator(
    metered_client, settings, scripted, tmp_path
):
    server = start_metrics_server(0, host="127.0.0.1")
    try:
        await _tool_loop_with_a_bad_tool_call(metered_client, settings, scripted)
        await _code_mode_with_a_failing_program(metered_client, settings, scripted)
        await _pipeline_with_a_broken_edge(metered_client, settings, scripted)
        await _monitor_with_an_off_contract_nudge(metered_client, settings, scripted, tmp_path)
        samples = _scrape(server.url + "/metrics")
    finally:
        server.stop()

    checks = _by(samples["agentsteps_contract_checks_total"], "contract", "phase")
    failed = _by(samples["agentsteps_contract_checks_total"], "contract", "phase", outcome="fail")
    violations = _by(samples["agentsteps_contract_violations_total"], "contract", "phase")
    checked = {contract for contract, _ in checks}
    assert PATHS <= checked, checked
    assert PATHS <= {contract for contract, _ in violations}
    for key, count in violations.items():
        # Same denominator everywhere: a failed check is one violation, so the rate is within [0, 1].
        assert key in checks, key
        assert count == failed.get(key, 0.0), key
        assert 0 <= count / checks[key] <= 1, key
    # One family each: the workflow-side counts did not create a second, differently labelled series.
    assert all(set(s.labels) == {"contract", "phase", "outcome"} for s in samples["agentsteps_contract_checks_total"])
    # Each path's violation went down the ladder, and the re-prompt was counted under its contract.
    reprompted = {contract for (contract,) in _by(samples["agentsteps_reprompts_total"], "contract")}
    assert {"code.program", "reply", "monitor.nudge"} <= reprompted, reprompted
    assert reprompted & {"llm.call", "tool.get_weather"}, reprompted
    # Bounded labels only.
    for sample in samples["agentsteps_contract_violations_total"]:
        assert set(sample.labels) == {"contract", "phase", "kind"}
    assert json.dumps(sorted(checked))  # labels are plain strings
