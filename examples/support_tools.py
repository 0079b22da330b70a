"""The Python stand-in for the ticket tracker's update tool, used by the support_reply pipeline.

Register it with ``tool_factories = ["agentsteps.examples.support_tools:build_registry"]``.
Tickets live in memory: this is a demo and test double, not a store. Like
every example tool with a side effect, it dedupes on its idempotency key: a
repeated key returns the first call's result and changes nothing.
"""

from __future__ import annotations

from ..activities.tools.registry import ToolContext, ToolRegistry
from ..contracts import ToolError
from ..contracts.config.settings import WorkerSettings
from .support_models import TicketState, TicketUpdate

SEED_TICKETS = {
    "PROJ-1": TicketState(issue_id="PROJ-1", state="open", assignee=None, comment_count=0),
    "PROJ-2": TicketState(issue_id="PROJ-2", state="in_progress", assignee="ada", comment_count=2),
}


def build_registry(settings: WorkerSettings | None = None) -> ToolRegistry:
    registry = ToolRegistry()
    tickets = {k: v.model_copy() for k, v in SEED_TICKETS.items()}
    applied: dict[str, TicketState] = {}

    @registry.tool(side_effects=True)
    def update_ticket(update: TicketUpdate, ctx: ToolContext) -> TicketState:
        """Change a ticket's state or assignee and record an internal comment. Applied once per idempotency key."""
        if ctx.idempotency_key in applied:
            return applied[ctx.idempotency_key]
        current = tickets.get(update.issue_id)
        if current is None:
            raise ToolError(f"no ticket {update.issue_id!r}; known: {', '.join(sorted(tickets))}")
        changed = current.model_copy(
            update={
                "state": update.state or current.state,
                "assignee": update.assignee if update.assignee is not None else current.assignee,
                "comment_count": current.comment_count + 1,
            }
        )
        tickets[update.issue_id] = changed
        applied[ctx.idempotency_key] = changed
        return changed

    return registry
