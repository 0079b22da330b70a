"""What a card says, for the person deciding: labels from the tool's schema, the headline, the order (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentsteps.console import present, reads
from agentsteps.contracts.approvals import PendingApproval

pytestmark = pytest.mark.fast

NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
SCHEMA = {
    "type": "object",
    "properties": {
        "amount_eur": {"type": "number", "title": "Amount Eur", "description": "Amount to refund, in euros"},
        "desk": {"type": "string", "title": "Support desk"},
        "order_id": {"type": "string", "title": "Order Id"},
        "reason": {"type": "string", "description": "Why the customer asked. " * 5},
    },
    "required": ["amount_eur"],
}


def pending(expires_in: float = 3600, asked_ago: float = 60, **more) -> PendingApproval:
    return PendingApproval(
        approval_id=more.pop("approval_id", "0:call_1_0"),
        tool="refund_order",
        arguments='{"amount_eur": 40, "desk": "EU", "order_id": "A-17", "reason": "late", "extra": 1}',
        reason="refund_order requires a person's approval before it runs",
        requested_at=NOW - timedelta(seconds=asked_ago),
        expires_at=NOW + timedelta(seconds=expires_in),
        input_schema=SCHEMA,
        description=more.pop("description", "Refund an order. Money leaves the company."),
        **more,
    )


def test_labels_come_from_written_titles_then_descriptions_never_a_made_up_title():
    labels = {a.title: a.label for a in present.arguments(pending())}
    assert labels["Amount Eur"] == "Amount to refund, in euros"  # pydantic's made-up title loses to the description
    assert labels["Support desk"] == "Support desk"  # a title someone wrote
    assert labels["Order Id"] == "Order id"  # neither: the name in words
    assert labels["reason"] == "Reason"  # a long description stays under the value, not in the label
    assert labels["extra"] == "Extra"


def test_the_headline_is_the_tools_own_words_and_the_summary_its_first_arguments():
    assert present.headline(pending()) == "Refund an order"
    assert present.summary(pending()) == "Amount to refund, in euros: 40 · Support desk: EU · Order id: A-17 · …"
    assert present.headline(pending(description="")) == "Refund order"


def test_the_most_urgent_call_comes_first_and_among_equals_the_newest():
    row = reads.Row("w", "r", "run", "running", NOW, None)
    later = reads.Waiting(row, pending(expires_in=7200, approval_id="a"))
    soon_old = reads.Waiting(row, pending(expires_in=600, asked_ago=500, approval_id="b"))
    soon_new = reads.Waiting(row, pending(expires_in=600, asked_ago=5, approval_id="c"))
    ordered = reads.urgent_first([later, soon_old, soon_new])
    assert [w.pending.approval_id for w in ordered] == ["c", "b", "a"]
    assert present.iso(NOW) == "2026-12-06T09:00:00Z"
