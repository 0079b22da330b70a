"""``approval.notify``: post one notice to every webhook configured for its tool or agent.

Every retry of one notice carries the same delivery id (``X-AgentSteps-Delivery``,
``Idempotency-Key``): a receiver that keeps the ids it took sees each notice
once, whatever the worker went through. A webhook that accepted (2xx) is
remembered in the attempt's heartbeat, so a retry after another webhook failed
sends only to those still owed. The URL and the secret never leave the
worker's settings: the history records the webhook names that accepted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from temporalio import activity

from ...contracts.approvals import ApprovalNotice, ApprovalTargets, NoticeDelivery
from ...contracts.config.settings import ApprovalWebhook
from ...contracts.errors import WebhookDeliveryError
from ...contracts.names import APPROVAL_NOTIFY, APPROVAL_TARGETS
from ...failures import to_application_error
from .. import attempts
from .shapes import body
from .signing import sign

_log = logging.getLogger("agentsteps.approval_webhooks")
_DELIVERED = "webhooks_delivered"
_HEARTBEAT_SECONDS = 1.0


class ApprovalNotifier:
    """Posts with its own aiohttp session per notice: the worker's shared HTTP client logs each request's
    URL, and a webhook's URL is a credential (a Slack incoming webhook's is)."""

    def __init__(self, webhooks: list[ApprovalWebhook], link_secret: str = "") -> None:
        self.webhooks = webhooks
        self.link_secret = link_secret

    @activity.defn(name=APPROVAL_NOTIFY)
    async def notify(self, notice: ApprovalNotice) -> NoticeDelivery:
        earlier = attempts.recalled(_DELIVERED)
        delivered: list[str] = list(earlier) if isinstance(earlier, list) else []
        owed = [w for w in self.webhooks if w.wants(notice.pending.tool, notice.agent) and w.name not in delivered]
        beating = asyncio.create_task(_beat())
        try:
            failed: list[str] = []
            async with aiohttp.ClientSession() as http:
                for webhook in owed:
                    problem = await self._post(http, webhook, notice)
                    if problem is None:
                        delivered.append(webhook.name)
                        attempts.remember(_DELIVERED, delivered)
                    else:
                        failed.append(f"{webhook.name} ({problem})")
        finally:
            beating.cancel()
        if failed:
            raise to_application_error(
                WebhookDeliveryError(f"approval webhook {', '.join(failed)} did not take notice {notice.delivery_id}")
            )
        return NoticeDelivery(delivery_id=notice.delivery_id, kind=notice.kind, delivered=delivered)

    async def _post(self, http: aiohttp.ClientSession, webhook: ApprovalWebhook, notice: ApprovalNotice) -> str | None:
        """None once the webhook accepted; else why not (a status or an error's kind, never the URL)."""
        data = json.dumps(
            body(notice, webhook.shape, webhook.console_url, self.link_secret), ensure_ascii=False
        ).encode()
        stamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "agentsteps-approvals/1",
            "X-AgentSteps-Event": f"approval.{notice.kind}",
            "X-AgentSteps-Delivery": notice.delivery_id,
            "Idempotency-Key": notice.delivery_id,
            "X-AgentSteps-Timestamp": str(stamp),
            "X-AgentSteps-Signature": sign(webhook.secret.get_secret_value(), stamp, data),
        }
        try:
            async with http.post(
                webhook.url.get_secret_value(),
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=webhook.timeout_seconds),
                allow_redirects=False,
            ) as answer:
                status = answer.status
        except Exception as exc:  # any transport failure is retried; its text may hold the URL, so only its kind
            _log.warning("approval webhook %s: %s", webhook.name, type(exc).__name__)
            return type(exc).__name__
        if 200 <= status < 300:
            return None
        _log.warning("approval webhook %s answered %s", webhook.name, status)
        return f"HTTP {status}"

    @activity.defn(name=APPROVAL_TARGETS)
    async def targets(self) -> ApprovalTargets:
        return ApprovalTargets(webhooks=[w.filter() for w in self.webhooks])

    def activities(self) -> list[Callable[..., Awaitable[Any]]]:
        return [self.notify, self.targets]


async def _beat() -> None:
    """Alive while a slow receiver answers: a killed worker's notice is retried within the heartbeat timeout."""
    while True:
        attempts.keep_alive()
        await asyncio.sleep(_HEARTBEAT_SECONDS)


__all__ = ["ApprovalNotifier"]
