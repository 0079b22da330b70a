"""A notice's JSON body: Slack-compatible (``text`` and ``blocks``), and ``approval`` with the facts.

``shape = "slack"`` sends only ``text`` and ``blocks`` (a Slack incoming
webhook, or anything that speaks its format); ``agentsteps`` adds
``approval``, the structured record a program reads (docs/console.md).
Arguments are capped: a notice says what waits, the console shows it whole.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from ...contracts.approvals import ApprovalNotice, card_anchor, decision_link_signature

_ARGUMENTS_CHARS = 1500


def card_link(console_url: str, notice: ApprovalNotice) -> str:
    """The call's card on its run's page (``/runs/ID`` shows a session's page for a session)."""
    if not console_url:
        return ""
    anchor = card_anchor(notice.workflow_id, notice.pending.approval_id)
    return f"{console_url.rstrip('/')}/runs/{quote(notice.workflow_id, safe='')}#{anchor}"


def decision_link(console_url: str, link_secret: str, notice: ApprovalNotice, decision: str) -> str:
    """A signed link to the console's confirmation page for ``decision``; it expires with the call."""
    if not console_url or not link_secret:
        return ""
    p = notice.pending
    expires = int(p.expires_at.timestamp())
    signature = decision_link_signature(link_secret, notice.workflow_id, p.approval_id, decision, expires)
    query = urlencode({"w": notice.workflow_id, "a": p.approval_id, "d": decision, "exp": expires, "sig": signature})
    return f"{console_url.rstrip('/')}/approvals/link?{query}"


def body(notice: ApprovalNotice, shape: str, console_url: str, link_secret: str = "") -> dict[str, Any]:
    p = notice.pending
    until = p.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    link = card_link(console_url, notice)
    lead = "Reminder: still waiting" if notice.kind == "reminder" else "Waiting"
    who = f" ({notice.agent})" if notice.agent else ""
    text = f"{lead} for approval: {p.tool}{who}. Rejected if nobody decides by {until}."
    arguments = p.arguments if len(p.arguments) <= _ARGUMENTS_CHARS else p.arguments[:_ARGUMENTS_CHARS] + "…"
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"*{_plain(lead)} for approval:* `{_plain(p.tool)}`{_plain(who)}\n{_plain(p.reason)}.",
            },
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": f"```{_plain(arguments)}```"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"Rejected if nobody decides by {until}"}]},
    ]
    approve, reject = (decision_link(console_url, link_secret, notice, d) for d in ("approve", "reject"))
    if link:
        text += f" {link}"
        buttons: list[dict[str, Any]] = [
            {"type": "button", "text": {"type": "plain_text", "text": "Open in the console"}, "url": link}
        ]
        if approve:
            buttons += [
                {
                    "type": "button",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve…"},
                    "url": approve,
                },
                {"type": "button", "style": "danger", "text": {"type": "plain_text", "text": "Reject…"}, "url": reject},
            ]
        blocks.append({"type": "actions", "elements": buttons})
    sent: dict[str, Any] = {"text": text, "blocks": blocks}
    if shape == "agentsteps":
        sent["approval"] = {
            "event": f"approval.{notice.kind}",
            "delivery_id": notice.delivery_id,
            "workflow_id": notice.workflow_id,
            "agent": notice.agent,
            "approval_id": p.approval_id,
            "tool": p.tool,
            "reason": p.reason,
            "arguments": _json_or_text(p.arguments),
            "requested_at": p.requested_at.isoformat(),
            "expires_at": p.expires_at.isoformat(),
            "link": link,
            "approve_link": approve,
            "reject_link": reject,
        }
    return sent


def _plain(text: str) -> str:
    """Slack's mrkdwn controls (``<``, ``>``, ``&``) escaped, so model text cannot make a link or a mention."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _json_or_text(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


__all__ = ["body", "card_link", "decision_link"]
