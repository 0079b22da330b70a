"""The approval desk: tool calls that wait for a person, in the workflow.

``gate`` parks a call until ``decide`` (the ``approve`` / ``reject`` Update
handlers) records a decision for its ``approval_id`` or the timeout rejects
it. While it waits, the run holds nothing but a timer: a tool-loop step
waits in place, a code-mode program waits as a snapshot (its segment already
ended with the call pending). Deterministic: only ``wait_condition``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from itertools import islice
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from ..contracts import ToolSchema
    from ..contracts.approvals import (
        ApprovalDecision,
        ApprovalNotice,
        ApprovalOutcome,
        ApprovalRecord,
        ApprovalTargets,
        NoticeDelivery,
        NoticeKind,
        PendingApproval,
        WebhookFilter,
        parse_decision,
    )
    from ..contracts.errors import ApprovalError
    from ..contracts.names import (
        APPROVAL_NOTIFY,
        APPROVAL_TARGETS,
        APPROVALS_QUERY,
        APPROVE_UPDATE,
        DECISIONS_QUERY,
        REJECT_UPDATE,
    )
    from ..contracts.persisted_ids import approval_delivery_id
    from ..failures import to_application_error
    from ..telemetry import workflow_metrics
    from .releases.gates import notifies_approvers

_DECIDED_KEPT = 200
_CONTEXT_CHARS = 4000
REMIND_AT = 0.8
"""The reminder goes when this share of a call's wait has passed with no decision (a fifth before its timeout)."""
_NOTIFY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))


class ApprovalDesk:
    def __init__(self) -> None:
        self.pending: dict[str, PendingApproval] = {}
        self.decided: dict[str, ApprovalRecord] = {}
        self._unread: set[str] = set()
        """Decided ids whose call is still waiting (has not read its decision): never forgotten."""
        self.on_request: Callable[[PendingApproval], None] | None = None
        """Called when a call starts waiting (the progress stream publishes it)."""
        self.on_change: Callable[[bool], None] | None = None
        """Called with "is any call waiting" when a call starts or stops waiting (search attributes)."""
        self._notices: list[asyncio.Future[NoticeDelivery | None]] = []
        self._targets: asyncio.Future[ApprovalTargets] | None = None

    def remember(self, records: list[ApprovalRecord]) -> None:
        """Decisions carried over continue-as-new: a late second decision still gets "already decided"."""
        for record in records[-_DECIDED_KEPT:]:
            self.decided[record.approval_id] = record

    def recent(self) -> list[ApprovalRecord]:
        """What a session carries over continue-as-new (at most the last 200 decisions)."""
        return list(self.decided.values())[-_DECIDED_KEPT:]

    async def gate(
        self,
        approval_id: str,
        tool: ToolSchema,
        arguments: str,
        timeout_seconds: float,
        *,
        model_text: str = "",
        program: str = "",
        agent: str = "",
    ) -> ApprovalRecord:
        now = workflow.now()
        timeout = timedelta(seconds=timeout_seconds)
        pending = PendingApproval(
            approval_id=approval_id,
            tool=tool.name,
            arguments=arguments,
            reason=f"{tool.name} requires a person's approval before it runs"
            + (" (it has side effects)" if tool.side_effects else ""),
            requested_at=now,
            expires_at=now + timeout,
            model_text=model_text[:_CONTEXT_CHARS],
            program=program[:_CONTEXT_CHARS],
            input_schema=tool.parameters,
            description=tool.description[:_CONTEXT_CHARS],
        )
        self.pending[approval_id] = pending
        workflow_metrics.record_approval_requested(tool.name)
        if self.on_request is not None:
            self.on_request(pending)
        if self.on_change is not None:
            self.on_change(True)
        try:
            told = notifies_approvers() and (await self._webhooks()).wants(tool.name, agent)
            if told and approval_id not in self.decided:
                await self._wait_notifying(pending, agent)
            else:
                await workflow.wait_condition(lambda: approval_id in self.decided, timeout=timeout)
        except asyncio.TimeoutError:
            self._record(pending, "timed_out", "", f"no decision within {timeout_seconds:g} s")
        except asyncio.CancelledError:
            # A sibling call failed the turn (or the run was cancelled): nobody will read this call's result.
            self._record(pending, "withdrawn", "", "its turn ended before a decision; the call did not run")
            self._settle(approval_id)
            raise
        # Not in a ``finally``: a worker evicting this run closes the coroutine with GeneratorExit outside
        # the workflow's event loop, where ``on_change`` (a search-attribute upsert) cannot run.
        self._settle(approval_id)
        return self.decided[approval_id]

    def _webhooks(self) -> asyncio.Future[ApprovalTargets]:
        """The worker's webhook filters, asked once per run (one local activity, at its first waiting call):
        a deployment without webhooks schedules no notice and no reminder, however many calls wait."""
        if self._targets is None:
            self._targets = asyncio.ensure_future(_ask_targets())
        return self._targets

    async def _wait_notifying(self, pending: PendingApproval, agent: str) -> None:
        """Wait as ``gate`` does, telling the webhooks when the call starts waiting and once more when a fifth
        of its wait is left. Each notice is an activity: a worker killed right after this still sends it."""
        decided = lambda: pending.approval_id in self.decided  # noqa: E731
        wait = pending.expires_at - pending.requested_at
        self._notify(pending, agent, "waiting")
        try:
            await workflow.wait_condition(decided, timeout=wait * REMIND_AT)
        except asyncio.TimeoutError:
            self._notify(pending, agent, "reminder")
            await workflow.wait_condition(decided, timeout=wait - wait * REMIND_AT)

    def _notify(self, pending: PendingApproval, agent: str, kind: NoticeKind) -> None:
        info = workflow.info()
        notice = ApprovalNotice(
            kind=kind,
            delivery_id=approval_delivery_id(info.workflow_id, info.run_id, pending.approval_id, kind),
            workflow_id=info.workflow_id,
            agent=agent,
            # What waits, why and until when; not the tool's schema and description (the history holds them
            # once, in the call that described the tools) nor the program (the console shows both).
            pending=pending.model_copy(
                update={"input_schema": None, "description": "", "program": "", "model_text": pending.model_text[:500]}
            ),
        )
        # Not awaited: the call waits for a person, not for the webhook; the task keeps a failure out of the run.
        self._notices.append(asyncio.ensure_future(_send(notice, pending.expires_at - workflow.now())))

    def _settle(self, approval_id: str) -> None:
        self.pending.pop(approval_id, None)
        self._unread.discard(approval_id)
        if self.on_change is not None:
            self.on_change(bool(self.pending))

    def check(self, raw: Any) -> ApprovalDecision:
        """Parse and validate an Update's argument: the handlers' validator."""
        try:
            decision = parse_decision(raw)
        except ValueError as exc:
            raise to_application_error(ApprovalError(str(exc))) from None
        self.validate(decision)
        return decision

    def validate(self, decision: ApprovalDecision) -> None:
        """The Update validator: unknown and already-decided ids are refused before history."""
        done = self.decided.get(decision.approval_id)
        if done is not None and done.outcome == "withdrawn":
            raise to_application_error(ApprovalError(f"approval {decision.approval_id!r} was withdrawn: {done.note}"))
        if done is not None:
            who = f" by {done.approver}" if done.approver else ""
            at = done.decided_at.strftime("%Y-%m-%d %H:%M:%S UTC")
            raise to_application_error(
                ApprovalError(
                    f"approval {decision.approval_id!r} was already {done.outcome.replace('_', ' ')}{who} at {at}"
                )
            )
        if decision.approval_id not in self.pending:
            waiting = ", ".join(sorted(self.pending)) or "none"
            raise to_application_error(
                ApprovalError(f"no call is waiting for approval under id {decision.approval_id!r} (waiting: {waiting})")
            )

    def decide(self, raw: Any, outcome: ApprovalOutcome) -> ApprovalRecord:
        decision = self.check(raw)  # again: two decisions accepted in one workflow task both passed the validator
        return self._record(self.pending[decision.approval_id], outcome, decision.approver, decision.note)

    def _record(self, pending: PendingApproval, outcome: ApprovalOutcome, approver: str, note: str) -> ApprovalRecord:
        now = workflow.now()
        record = ApprovalRecord(
            approval_id=pending.approval_id,
            tool=pending.tool,
            outcome=outcome,
            approver=approver,
            note=note,
            decided_at=now,
            waited_seconds=(now - pending.requested_at).total_seconds(),
        )
        self.decided[pending.approval_id] = record
        if pending.approval_id in self.pending:
            self._unread.add(pending.approval_id)
        self._forget_oldest()
        workflow_metrics.record_approval_decided(outcome, record.waited_seconds)
        return record

    def _forget_oldest(self) -> None:
        """Keep the latest 200 decisions, but never one whose call has not read it yet.

        Many decisions can land in one workflow task (a person approving a batch)
        before any waiting call wakes; dropping one of those would leave its call
        waiting for a decision already made, until it timed out.

        Linear in a batch: while every decision beyond the 200 is still unread there is
        nothing to forget, and that is known without a scan (``_unread`` holds only
        decided ids still waiting, so ``len(decided) - len(_unread)`` bounds the
        forgettable ones from above). Scanning all decisions for each one made a batch of
        n decisions in one task cost about n²/2 look-ups. What is forgotten is unchanged:
        the oldest decisions whose call has read them.
        """
        excess = len(self.decided) - _DECIDED_KEPT
        if excess <= 0 or len(self.decided) <= len(self._unread):
            return
        read = (a for a in self.decided if a not in self.pending)
        for approval_id in list(islice(read, excess)):
            del self.decided[approval_id]


async def _ask_targets() -> ApprovalTargets:
    """A worker that cannot answer (one built without the notifier) is taken to have webhooks for every call:
    each notice's own activity then decides, as it would without this question."""
    try:
        targets: ApprovalTargets = await workflow.execute_local_activity(
            APPROVAL_TARGETS,
            result_type=ApprovalTargets,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
        return targets
    except ActivityError:
        return ApprovalTargets(webhooks=[WebhookFilter()])


async def _send(notice: ApprovalNotice, left: timedelta) -> NoticeDelivery | None:
    """``approval.notify``, retried until the call's own deadline; given up quietly after it."""
    try:
        delivery: NoticeDelivery = await workflow.execute_activity(
            APPROVAL_NOTIFY,
            notice,
            result_type=NoticeDelivery,
            start_to_close_timeout=timedelta(seconds=90),
            heartbeat_timeout=timedelta(seconds=3),
            schedule_to_close_timeout=max(left, timedelta(minutes=1)),
            retry_policy=_NOTIFY_RETRY,
        )
        return delivery
    except ActivityError:
        return None


class ApprovalHandlers:
    """The ``approve`` / ``reject`` Updates and the pending-approvals Query, one shape for every workflow.

    A workflow class inherits them and keeps its desk in ``self.approvals``;
    ``_check_decisions_open`` is where it refuses decisions (a closed session).
    """

    approvals: ApprovalDesk

    def _check_decisions_open(self) -> None:
        """Raise ``ApplicationError`` when decisions are no longer taken; by default they always are."""

    @workflow.update(name=APPROVE_UPDATE)
    def approve(self, decision: Any) -> ApprovalRecord:
        return self.approvals.decide(decision, "approved")

    @approve.validator
    def _check_approve(self, decision: Any) -> None:
        self._check_decisions_open()
        self.approvals.check(decision)

    @workflow.update(name=REJECT_UPDATE)
    def reject(self, decision: Any) -> ApprovalRecord:
        return self.approvals.decide(decision, "rejected")

    @reject.validator
    def _check_reject(self, decision: Any) -> None:
        self._check_decisions_open()
        self.approvals.check(decision)

    @workflow.query(name=APPROVALS_QUERY)
    def pending_approvals(self) -> list[PendingApproval]:
        return list(self.approvals.pending.values())

    @workflow.query(name=DECISIONS_QUERY)
    def decisions(self) -> list[ApprovalRecord]:
        return self.approvals.recent()


__all__ = ["ApprovalDesk", "ApprovalHandlers"]
