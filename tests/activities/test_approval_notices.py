"""An approval notice's signature and body, as a receiver checks and reads them (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from agentsteps.activities.notify import sign, verify
from agentsteps.activities.notify.shapes import body
from agentsteps.contracts.approvals import ApprovalNotice, PendingApproval
from agentsteps.contracts.config.settings import ApprovalWebhook

pytestmark = pytest.mark.fast

NOW = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)


def notice(arguments: str = '{"order": "A-17", "amount": 40.0}') -> ApprovalNotice:
    pending = PendingApproval(
        approval_id="0:call_1_0",
        tool="refund",
        arguments=arguments,
        reason="refund requires a person's approval before it runs",
        requested_at=NOW,
        expires_at=NOW + timedelta(hours=1),
    )
    return ApprovalNotice(delivery_id="w/r/0:call_1_0/waiting", workflow_id="w", agent="refunds", pending=pending)


def test_a_signature_verifies_only_for_the_same_secret_body_and_a_fresh_timestamp():
    raw = b'{"text": "hi"}'
    signature = sign("s3cret", 1_796_538_229, raw)
    assert signature.startswith("v1=") and verify("s3cret", "1796538229", raw, signature, now=1_796_538_230)
    assert not verify("other", "1796538229", raw, signature, now=1_796_538_230)  # forged
    assert not verify("s3cret", "1796538229", raw + b" ", signature, now=1_796_538_230)  # altered body
    assert not verify("s3cret", "1796538229", raw, signature, now=1_796_538_229 + 301)  # replayed later
    for hostile in ("", "-1", "1e9", "1796538229; DROP", "１２３"):
        assert not verify("s3cret", hostile, raw, signature, now=1_796_538_230)


def test_the_slack_shape_carries_text_and_blocks_only_and_escapes_slack_markup():
    sent = body(notice('{"note": "<!channel> <https://evil.example|click>"}'), "slack", "https://c.example")
    assert set(sent) == {"text", "blocks"}
    blocks = json.dumps(sent["blocks"])
    assert "<!channel>" not in blocks and "&lt;!channel&gt;" in blocks
    assert sent["text"].startswith(
        "Waiting for approval: refund (refunds). Rejected if nobody decides by 2026-12-06 10:30 UTC."
    )


def test_the_agentsteps_shape_says_what_waits_why_until_when_and_links_its_card():
    sent = body(notice(), "agentsteps", "https://c.example/")
    approval = sent["approval"]
    assert approval["arguments"] == {"order": "A-17", "amount": 40.0} and approval["tool"] == "refund"
    assert approval["expires_at"] == "2026-12-06T10:30:00+00:00" and approval["reason"].startswith("refund requires")
    assert approval["link"].startswith("https://c.example/runs/w#c") and approval["event"] == "approval.waiting"
    assert (
        "link" not in body(notice(), "agentsteps", "")["approval"]
        or not body(notice(), "agentsteps", "")["approval"]["link"]
    )


def test_a_webhook_needs_an_http_url_and_a_plain_name():
    with pytest.raises(ValidationError, match="http"):
        ApprovalWebhook.model_validate({"name": "a", "url": "file:///etc/passwd", "secret": "s"})
    with pytest.raises(ValidationError):
        ApprovalWebhook.model_validate({"name": "a b<", "url": "https://x", "secret": "s"})
    hook = ApprovalWebhook.model_validate(
        {"name": "a", "url": "https://x/T/B/k", "secret": "hush-123", "tools": ["refund"]}
    )
    assert hook.wants("refund", "any") and not hook.wants("lookup", "any")
    assert "https://x/T/B/k" not in repr(hook) and "hush-123" not in repr(hook)  # URL and secret stay hidden


def test_signed_decision_links_ride_along_only_with_a_link_secret_and_a_console_url():
    plain = body(notice(), "agentsteps", "https://c.example")
    assert plain["approval"]["approve_link"] == "" and len(plain["blocks"][-1]["elements"]) == 1
    signed = body(notice(), "agentsteps", "https://c.example", "link-secret-0123")
    approve = signed["approval"]["approve_link"]
    assert (
        approve.startswith("https://c.example/approvals/link?w=w&a=0%3Acall_1_0&d=approve&exp=") and "sig=" in approve
    )
    assert signed["approval"]["reject_link"] != approve and len(signed["blocks"][-1]["elements"]) == 3
