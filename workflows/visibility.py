"""What a run or session shows in Temporal's visibility: the ``AgentSteps*`` search attributes.

The console lists runs through visibility (``list_workflows``), never by
reading histories, so the columns it shows (spec, model, steps, tokens, cost,
violations, waiting for approval, last activity) must be search attributes.
Each upsert is a workflow command (a billable action on Temporal Cloud), so a
run upserts only when a column changes in a way a person filters on: at its
start, unless the client set the attributes with the start
(``client.search_attributes.run_start_attributes``: free, part of the start);
when a call starts or stops waiting for approval; and at its end, unless it
completed (a session: at its start, each turn's end and the approvals). Steps
and tokens of a running run come from its ``state`` query instead; those of a
completed run from its result, which the console reads (``ExecutionStatus``
already says it completed), so a completed run ends without an upsert. A
failed run, which has no result, upserts its totals.

Gated by ``SEARCH_ATTRIBUTES_PATCH`` (``releases.gates.keeps_search_attributes``),
asked once before the first command: runs recorded before it replay without upserts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from ..contracts import AgentSpec, Usage
    from ..contracts.names import (
        SA_AWAITING_APPROVAL,
        SA_COST,
        SA_LAST_ACTIVITY,
        SA_MODEL,
        SA_SPEC,
        SA_STEPS,
        SA_TENANT,
        SA_TOKENS,
        SA_VIOLATIONS,
    )
    from .releases.gates import keeps_search_attributes

SPEC = SearchAttributeKey.for_keyword(SA_SPEC)
MODEL = SearchAttributeKey.for_keyword(SA_MODEL)
STEPS = SearchAttributeKey.for_int(SA_STEPS)
TOKENS = SearchAttributeKey.for_int(SA_TOKENS)
VIOLATIONS = SearchAttributeKey.for_int(SA_VIOLATIONS)
COST = SearchAttributeKey.for_float(SA_COST)
AWAITING_APPROVAL = SearchAttributeKey.for_bool(SA_AWAITING_APPROVAL)
LAST_ACTIVITY = SearchAttributeKey.for_datetime(SA_LAST_ACTIVITY)
TENANT = SearchAttributeKey.for_keyword(SA_TENANT)


class Visibility:
    """One run's search attributes; every method is a no-op for runs recorded before the patch."""

    def __init__(self) -> None:
        self.on = False
        self._awaiting = False

    def start(self, spec: AgentSpec, tenant: str | None = None) -> None:
        """Before the run's first command: decides, once, whether this run upserts at all.

        A run with a ``tenant`` names it in the same upsert (operators list runs by tenant)."""
        self.on = keeps_search_attributes()
        if workflow.info().typed_search_attributes.get(SPEC) is not None:
            return  # set by the client with the start (part of the start event, so replay reads the same)
        self._upsert(
            *([TENANT.value_set(tenant)] if tenant else []),
            SPEC.value_set(spec.name[:200]),
            MODEL.value_set(spec.model.model[:200]),
            STEPS.value_set(0),
            TOKENS.value_set(0),
            VIOLATIONS.value_set(0),
            COST.value_set(0.0),
            AWAITING_APPROVAL.value_set(False),
        )

    def resume(self) -> None:
        """A session continued-as-new: its attributes carried over; only decide whether to upsert."""
        self.on = keeps_search_attributes()

    def awaiting(self, waiting: bool) -> None:
        """A call started or stopped waiting for a person; only a change is upserted."""
        if waiting != self._awaiting:
            self._awaiting = waiting
            self._upsert(AWAITING_APPROVAL.value_set(waiting))

    def totals(self, *, steps: int, usage: Usage, violations: int, cost_usd: float, model: str) -> None:
        updates: list[SearchAttributeUpdate[Any]] = [
            STEPS.value_set(steps),
            TOKENS.value_set(usage.total_tokens),
            VIOLATIONS.value_set(violations),
            COST.value_set(round(cost_usd, 6)),
        ]
        if model:
            updates.append(MODEL.value_set(model[:200]))
        self._upsert(*updates)

    def _upsert(self, *updates: SearchAttributeUpdate[Any]) -> None:
        if self.on:
            now: datetime = workflow.now()
            workflow.upsert_search_attributes([*updates, LAST_ACTIVITY.value_set(now)])


__all__ = ["Visibility"]
