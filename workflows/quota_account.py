"""``QuotaAccount``: the entity workflow behind one provider quota or one tenant's budget.

Runs signal ``quota_acquire`` and get a ``quota_grant`` signal back, at once or
when capacity frees (the run waits durably: no worker slot is held); they
signal ``quota_release`` with the call's real use. The ledger (``contracts/
quotas/ledger.py``) decides; this workflow only keeps it, wakes when a lease
runs out or the window moves, sends the answers, and continues-as-new with the
ledger before its history grows long. Operators read it with the
``quota_view`` query and change a live limit with the ``set_limits`` Update.

A grant whose run is gone (the signal finds no open workflow) is released at
once; a lease its run never releases expires.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from ..contracts.errors import QuotaConfigError
    from ..contracts.names import (
        QUOTA_ACCOUNT_WORKFLOW,
        QUOTA_ACQUIRE_SIGNAL,
        QUOTA_GRANT_SIGNAL,
        QUOTA_RELEASE_SIGNAL,
        QUOTA_SET_UPDATE,
        QUOTA_VIEW_QUERY,
    )
    from ..contracts.quotas.ledger import AccountInput, Ledger
    from ..contracts.quotas.wire import AccountView, LeaseGrant, LeaseRelease, LeaseRequest, LimitChange
    from ..failures import to_application_error
    from ..telemetry import workflow_metrics
    from .entries import NO_INPUT, signal_input, start_input

HISTORY_EVENTS_BEFORE_CONTINUE = 8_000


@workflow.defn(name=QUOTA_ACCOUNT_WORKFLOW)
class QuotaAccountWorkflow:
    def __init__(self) -> None:
        self.ledger: Ledger | None = None
        self.outbox: list[tuple[str, LeaseGrant]] = []
        self.pending: list[LeaseRequest | LeaseRelease] = []
        self.changed = False

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> None:
        inp = start_input(raw, AccountInput)
        self.ledger = ledger = Ledger(inp.ledger)
        self._apply_pending()
        while True:
            now = workflow.now().timestamp()
            self.outbox.extend((g.request_id, g) for g in ledger.dispatch(now))
            await self._send()
            if self._history_is_long():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self.outbox and not self.changed:
                    workflow.continue_as_new(AccountInput(ledger=ledger.state))
            wake = ledger.next_wakeup(workflow.now().timestamp())
            timeout = None if wake is None else timedelta(seconds=max(0.05, wake - workflow.now().timestamp()))
            try:
                await workflow.wait_condition(lambda: self.changed or bool(self.outbox), timeout=timeout)
            except asyncio.TimeoutError:
                pass
            self.changed = False

    def _history_is_long(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() > HISTORY_EVENTS_BEFORE_CONTINUE

    async def _send(self) -> None:
        assert self.ledger is not None
        while self.outbox:
            batch, self.outbox = self.outbox, []
            sent = await asyncio.gather(*(self._signal(grant) for _, grant in batch), return_exceptions=True)
            for (_, grant), outcome in zip(batch, sent, strict=True):
                if isinstance(outcome, BaseException) and grant.granted:
                    # The run is gone: what it was granted goes back now, not when the lease runs out.
                    self.outbox.extend(
                        (g.request_id, g)
                        for g in self.ledger.release(
                            LeaseRelease(request_id=grant.request_id), workflow.now().timestamp()
                        )
                    )

    async def _signal(self, grant: LeaseGrant) -> None:
        if grant.requester:
            await workflow.get_external_workflow_handle(grant.requester).signal(QUOTA_GRANT_SIGNAL, grant)

    def _apply_pending(self) -> None:
        """Signals that arrived before ``run`` built the ledger (the first task of a new run)."""
        pending, self.pending = self.pending, []
        for message in pending:
            self._apply(message)

    def _apply(self, message: LeaseRequest | LeaseRelease) -> None:
        assert self.ledger is not None
        now = workflow.now().timestamp()
        if isinstance(message, LeaseRequest):
            grants = self.ledger.offer(message, now)
            if self.ledger.state.quota is not None and any(
                r.request_id == message.request_id for r in self.ledger.state.queue
            ):
                # Counted as the wait starts: a dashboard sees calls waiting now, not only once they got through.
                workflow_metrics.record_quota_wait_started(self.ledger.name)
        else:
            grants = self.ledger.release(message, now)
        self.outbox.extend((g.request_id, g) for g in grants)
        self.changed = True

    @workflow.signal(name=QUOTA_ACQUIRE_SIGNAL)
    def acquire(self, raw: RawValue) -> None:
        request = signal_input(raw, LeaseRequest, QUOTA_ACQUIRE_SIGNAL)
        if request is None:
            return
        if self.ledger is None:
            self.pending.append(request)
        else:
            self._apply(request)

    @workflow.signal(name=QUOTA_RELEASE_SIGNAL)
    def release(self, raw: RawValue) -> None:
        release = signal_input(raw, LeaseRelease, QUOTA_RELEASE_SIGNAL)
        if release is None:
            return
        if self.ledger is None:
            self.pending.append(release)
        else:
            self._apply(release)

    @workflow.query(name=QUOTA_VIEW_QUERY)
    def view(self) -> AccountView:
        assert self.ledger is not None
        return self.ledger.view(workflow.now().timestamp())

    @workflow.update(name=QUOTA_SET_UPDATE)
    async def set_limits(self, raw: Any) -> AccountView:
        assert self.ledger is not None
        self.ledger.change(LimitChange.model_validate(raw))
        self.changed = True
        return self.ledger.view(workflow.now().timestamp())

    @set_limits.validator
    def _check(self, raw: Any) -> None:
        """A malformed change, or one that would make the limits invalid, is refused before it reaches history.

        Taken raw (not as ``LimitChange``): a payload that does not parse is this typed refusal too."""
        if self.ledger is None:
            raise to_application_error(QuotaConfigError.with_message("the account is starting; try again"))
        trial = Ledger(self.ledger.state.model_copy(deep=True))
        try:
            trial.change(LimitChange.model_validate(raw))
        except ValidationError as exc:  # one line per field, not pydantic's multi-line dump
            detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'change'}: {e['msg']}" for e in exc.errors())
            raise to_application_error(
                QuotaConfigError.with_message(f"invalid limit change (nothing changed): {detail}")
            ) from None
        except ValueError as exc:
            message = " ".join(str(exc).split())
            raise to_application_error(
                QuotaConfigError.with_message(f"invalid limit change (nothing changed): {message}")
            ) from None


__all__ = ["AccountInput", "QuotaAccountWorkflow"]
