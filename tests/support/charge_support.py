"""A careless charging tool and a model script that charges customers 0..n-1 in turn: the forks' effect probe."""

from __future__ import annotations

from pydantic import BaseModel

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry


class Charge(BaseModel):
    customer: int


def charging_registry(executed: list[int]) -> ToolRegistry:
    """``charge`` appends each customer it charged to ``executed``: a repeated effect shows as a repeat there."""
    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    def charge(args: Charge, ctx: ToolContext) -> dict:
        """Charge a customer (ignores its idempotency key, as careless tools do)."""
        executed.append(args.customer)
        return {"charged": args.customer}

    return registry


def charge_rules(charges: int) -> list[dict]:
    """Charge 0 on the user's message, k + 1 once k is charged, then answer "all charged"."""
    rules = [{"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "charge", "arguments": {"customer": 0}}]}}]
    for k in range(charges - 1):
        rules.append(
            {
                "match": {"role": "tool", "contains": f'"charged": {k}}}'},
                "reply": {"tool_calls": [{"name": "charge", "arguments": {"customer": k + 1}}]},
            }
        )
    rules.append(
        {"match": {"role": "tool", "contains": f'"charged": {charges - 1}}}'}, "reply": {"content": "all charged"}}
    )
    return rules
