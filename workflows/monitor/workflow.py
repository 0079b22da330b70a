"""StalledTicketMonitor: one tick of the stalled-ticket monitor.

Scan (a fixed code-mode program), plan (pure), act (LLM-drafted nudges and
escalations through ``tools.call``), record metrics (an activity), report.
Every tracker write carries a key derived from the issue and the tick's date,
so a retried activity, a replayed workflow or a second tick the same day
cannot write twice. See this package's docstring and ``docs/monitor.md``.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from ...contracts import DefaultResult, LLMRequest, LLMResponse, Message, ResponseFormat, ToolCallResult
    from ...contracts.code.program import CallOutcome, ProgramFunction, StartProgramInput
    from ...contracts.code.stubs import program_functions
    from ...contracts.errors import InvalidSpecError, MonitorScanError
    from ...contracts.json_schema import parse_json
    from ...contracts.monitor import (
        IssueFailure,
        MonitorInput,
        MonitorMetrics,
        MonitorReport,
        MonitorSpec,
        ScanResult,
        StalledIssue,
    )
    from ...contracts.names import MONITOR_RECORD, MONITOR_WORKFLOW
    from ...contracts.persisted_ids import scan_call_id, scan_call_key
    from ...contracts.violations import Violation, ViolationKind
    from ...failures import to_application_error
    from ...telemetry import workflow_metrics
    from ..calls import call_llm, call_outcome, call_tool, describe_tools
    from ..entries import NO_INPUT, start_input
    from ..ladder import Rung, ViolationLadder, retry_history
    from ..program_driver import drive_program, program_keys
    from ..releases.gates import effects_once
    from .nudges import (
        NUDGE_CONTRACT,
        NUDGE_SYSTEM_PROMPT,
        check_nudge,
        comment_body,
        escalate_key,
        nudge_key,
        nudge_prompt,
        nudge_schema,
        plan_action,
        template_nudge,
    )
    from .scan import scan_program


@workflow.defn(name=MONITOR_WORKFLOW)
class MonitorWorkflow:
    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> MonitorReport:
        inp = start_input(raw, MonitorInput)
        spec = inp.spec
        bounded = effects_once()  # the record's retries bounded
        as_of = _utc(inp.as_of or workflow.now())
        report = MonitorReport(monitor=spec.name, as_of=as_of, day=as_of.date().isoformat())

        scan, report.scan_tool_calls = await _scan(spec, as_of)
        report.stalled_ids = scan.stalled
        handled = {c.id for c in scan.candidates}
        report.deferred = [i for i in scan.stalled if i not in handled]

        nudges: list[StalledIssue] = []
        escalations: list[StalledIssue] = []
        for issue in scan.candidates:
            action = plan_action(issue, spec, as_of.date())
            if action == "nudge":
                nudges.append(issue)
            elif action == "escalate":
                escalations.append(issue)
            elif action == "nudged_today":
                report.nudged_today.append(issue.id)
            else:
                report.already_escalated.append(issue.id)

        await asyncio.gather(*(_escalate(spec, issue, report) for issue in escalations))
        drafter = _Drafter(spec, as_of, report)
        for start in range(0, len(nudges), spec.draft_concurrency):
            batch = nudges[start : start + spec.draft_concurrency]
            if report.usage.total_tokens >= spec.token_budget:
                report.deferred.extend(i.id for i in batch)
                continue
            await asyncio.gather(*(drafter.nudge(issue) for issue in batch))

        # Reports list ids in scan order (most stale first), whatever order the tasks finished in.
        order = {issue_id: n for n, issue_id in enumerate(scan.stalled)}
        for ids in (report.nudged, report.escalated, report.nudged_today, report.template_nudges, report.deferred):
            ids.sort(key=lambda i: order.get(i, len(order)))
        report.failed.sort(key=lambda f: order.get(f.issue_id, len(order)))

        metrics = MonitorMetrics(
            monitor=spec.name,
            run_id=workflow.info().run_id,
            stalled=len(report.stalled_ids),
            nudged=len(report.nudged),
            escalated=len(report.escalated),
        )
        if not bounded:
            await workflow.execute_activity(MONITOR_RECORD, metrics, start_to_close_timeout=timedelta(seconds=10))
            return report
        try:
            # Retried a few times, then given up inside a minute: metrics never hold a finished tick hostage.
            await workflow.execute_activity(
                MONITOR_RECORD,
                metrics,
                start_to_close_timeout=timedelta(seconds=10),
                schedule_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5), maximum_attempts=4
                ),
            )
        except ActivityError as exc:
            report.metrics_error = f"monitor.record failed: {_cause(exc)}"
        return report


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# ---------------------------------------------------------------- scan: the code-mode program


async def _scan(spec: MonitorSpec, as_of: datetime) -> tuple[ScanResult, int]:
    functions = await _program_functions(spec)
    info = workflow.info()
    tools = {f.python_name: f.tool for f in functions}
    run_key, legacy_run_key = program_keys("scan")
    start = StartProgramInput(
        run_key=run_key,
        legacy_run_key=legacy_run_key,
        program=scan_program(spec, as_of),
        functions=functions,
        limits=spec.program_limits,
        now=as_of.isoformat(),
        seed=workflow.random().randint(0, 2**62),
    )
    status = await drive_program(
        start,
        lambda call: _read(spec, info.run_id, tools[call.function], call.call_id, call.arguments),
        summary="scan for stalled issues",
    )
    if status.state != "completed":
        error = status.error
        raise to_application_error(
            MonitorScanError(
                f"the scan program failed: [{error.kind if error else '?'}] {error.message if error else ''}"
            )
        )
    try:
        return ScanResult.model_validate(status.value), status.calls_made
    except ValidationError as exc:
        raise to_application_error(MonitorScanError(f"the scan program returned an unexpected value: {exc}")) from None


async def _program_functions(spec: MonitorSpec) -> list[ProgramFunction]:
    wanted = {"list_issues": spec.tools.list_issues, "get_issue": spec.tools.get_issue}
    described = await describe_tools(list(wanted.values()), spec.tool_policy)
    by_tool = {f.tool: f for f in program_functions(described)}
    missing = [name for name in wanted.values() if name not in by_tool]
    if missing:
        raise to_application_error(
            InvalidSpecError.with_message(
                f"the worker offers no tracker tool named {', '.join(map(repr, missing))}; "
                "check the MCP server config and MonitorSpec.tools"
            )
        )
    # The program calls the tools by their tracker names, whatever prefix the worker's config gave them.
    return [by_tool[tool].model_copy(update={"python_name": name}) for name, tool in wanted.items()]


async def _read(spec: MonitorSpec, run_id: str, tool: str, call_id: int, arguments: str) -> CallOutcome:
    result = await _tool(spec, tool, arguments, call_id=scan_call_id(call_id), key=scan_call_key(run_id, call_id))
    return call_outcome(call_id, result)


async def _tool(spec: MonitorSpec, tool: str, arguments: str, *, call_id: str, key: str) -> ToolCallResult:
    return await call_tool(tool, arguments, call_id=call_id, key=key, policy=spec.tool_policy)


# ---------------------------------------------------------------- act


async def _write(
    spec: MonitorSpec,
    report: MonitorReport,
    issue_id: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    key: str,
    what: str,
    done: list[str],
    already: list[str] | None = None,
) -> None:
    """One tracker write under its idempotency key; where the issue lands in the report says how it went.

    ``done`` on success, ``already`` when the tracker says another tick made
    this very write first, else ``failed`` with ``what`` and the reason.
    """
    arguments = {**arguments, "idempotency_key": key}
    try:
        result = await _tool(spec, tool, json.dumps(arguments), call_id=key, key=key)
    except ActivityError as exc:
        report.failed.append(IssueFailure(issue_id=issue_id, reason=f"{what} failed: {_cause(exc)}"))
        return
    if not result.is_error:
        done.append(issue_id)
    elif already is not None and "IdempotencyConflict" in result.content:
        already.append(issue_id)
    else:
        report.failed.append(IssueFailure(issue_id=issue_id, reason=f"{what} refused: {result.content[:300]}"))


async def _escalate(spec: MonitorSpec, issue: StalledIssue, report: MonitorReport) -> None:
    arguments = {"issue_id": issue.id, "assignee": spec.lead, "add_labels": [spec.escalation_label]}
    await _write(
        spec,
        report,
        issue.id,
        spec.tools.update_issue,
        arguments,
        key=escalate_key(issue.id),
        what="escalation",
        done=report.escalated,
    )


class _Drafter:
    """Drafts and posts nudges; the violation ladder is per issue, the usage is per tick."""

    def __init__(self, spec: MonitorSpec, as_of: datetime, report: MonitorReport) -> None:
        self._spec = spec
        self._as_of = as_of
        self._report = report
        # The "default" rung is the fixed template; its value is never read.
        self._default = DefaultResult(value=None) if spec.template_fallback else None

    async def nudge(self, issue: StalledIssue) -> None:
        spec, report = self._spec, self._report
        try:
            message = await self._draft(issue)
        except ActivityError as exc:
            report.failed.append(IssueFailure(issue_id=issue.id, reason=f"drafting failed: {_cause(exc)}"))
            return
        if message is None:
            if not spec.template_fallback:
                report.failed.append(IssueFailure(issue_id=issue.id, reason="no draft met the nudge contract"))
                return
            message = template_nudge(issue, spec.stalled_after_days, spec.message_max_chars)
            report.template_nudges.append(issue.id)

        day = self._as_of.date()
        arguments = {"issue_id": issue.id, "body": comment_body(message, day), "author": spec.author}
        # A conflict: another tick posted today's nudge between our scan and our write.
        await _write(
            spec,
            report,
            issue.id,
            spec.tools.add_comment,
            arguments,
            key=nudge_key(issue.id, day),
            what="posting",
            done=report.nudged,
            already=report.nudged_today,
        )

    async def _draft(self, issue: StalledIssue) -> str | None:
        """A message that meets the contract, or None once the ladder says "default"."""
        spec, report = self._spec, self._report
        ladder = ViolationLadder([spec.model, *spec.fallback_models], spec.reprompt_budget, self._default)
        prompt = [
            Message.system(NUDGE_SYSTEM_PROMPT.format(max_chars=spec.message_max_chars)),
            Message.user(nudge_prompt(issue, self._as_of.date(), spec.stalled_after_days)),
        ]
        history = list(prompt)
        schema = ResponseFormat(name="nudge", json_schema=nudge_schema(spec.message_max_chars))
        while True:
            request = LLMRequest(config=ladder.current, messages=history, response_format=schema)
            response: LLMResponse = await call_llm(request, spec.llm_policy, report, summary=f"draft nudge {issue.id}")
            violations = list(response.violations)
            value: Any = None
            if not violations:
                value, problem = parse_json(response.message.content or "")
                violations = (
                    [
                        Violation(
                            contract=NUDGE_CONTRACT,
                            phase="post",
                            kind=ViolationKind.response_not_json,
                            path="$.content",
                            message=problem,
                        )
                    ]
                    if problem is not None
                    else check_nudge(value, issue)
                )
                workflow_metrics.record_check(NUDGE_CONTRACT, "post", violations)
            if not violations:
                message: str = value["message"]  # check_nudge proved it a string
                return message
            report.violations.extend(violations)
            decision = ladder.step(violations)
            if decision.rung is Rung.reprompt:
                report.reprompts += 1
            following = retry_history(decision, history, prompt, response.message, violations)
            if following is None:  # the default or fail rung: the caller goes on without a draft
                return None
            history = following


def _cause(exc: ActivityError) -> str:
    cause = exc.cause
    return str(cause)[:300] if cause is not None else str(exc)[:300]


__all__ = ["MonitorWorkflow"]
