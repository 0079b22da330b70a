"""A worker whose registry has a tool that requires approval, and counts its runs."""

from __future__ import annotations

from contextlib import asynccontextmanager

from pydantic import BaseModel

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.worker import running_worker


class RefundArgs(BaseModel):
    order: str
    amount: float


class Refund(BaseModel):
    order: str
    refunded: float


def approval_registry(ran: list[str]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(side_effects=True, requires_approval=True)
    def refund(args: RefundArgs, ctx: ToolContext) -> Refund:
        """Refund an order."""
        ran.append(ctx.idempotency_key)
        return Refund(order=args.order, refunded=args.amount)

    @registry.tool()
    def lookup(args: RefundArgs) -> Refund:
        """Look an order up."""
        return Refund(order=args.order, refunded=0)

    return registry


@asynccontextmanager
async def approval_worker(client, settings, ran: list[str]):
    async with running_worker(client, settings, registry=approval_registry(ran)) as worker:
        yield worker


REFUND_SCRIPT = {
    "rules": [
        {
            "match": {"role": "user"},
            "reply": {"tool_calls": [{"name": "refund", "arguments": {"order": "A-17", "amount": 40.0}}]},
        },
        {
            "match": {"tool_result_for": "refund", "contains": "rejected"},
            "reply": {"content": "The refund was refused."},
        },
        {
            "match": {"tool_result_for": "refund", "contains": "not approved in time"},
            "reply": {"content": "Nobody approved it."},
        },
        {"match": {"tool_result_for": "refund"}, "reply": {"content": "Refunded 40."}},
    ]
}


def approval_factory(settings) -> ToolRegistry:  # noqa: ANN001 - a tool factory (``module:function`` in settings)
    """For ``WorkerSettings.tool_factories``: the approval tools beside the demo ones."""
    return approval_registry([])


def webhook_settings(settings, url: str, secret: str, console_url: str):  # noqa: ANN001, ANN201
    """``settings`` with one approval webhook for the refund tool, in the ``agentsteps`` shape."""
    from agentsteps.contracts.config.settings import ApprovalWebhook

    hook = ApprovalWebhook.model_validate(
        {"name": "refund-desk", "url": url, "secret": secret, "tools": ["refund"], "console_url": console_url}
    )
    return settings.model_copy(update={"approval_webhooks": [hook]})
