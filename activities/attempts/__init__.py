"""What an activity's earlier attempts leave for the next one.

Temporal hands an attempt's last heartbeat details to the next attempt of the
same activity, even when the attempt failed: the one place a retried activity
can learn what its earlier attempts saw (the LLM activity counts the 429s it
met, the MCP fleet when its server was first found unavailable).
"""

from __future__ import annotations

from typing import Any

from temporalio import activity


def recalled(key: str) -> Any:
    """``key`` as the previous attempt's last heartbeat left it (``None`` on a first attempt or outside one)."""
    if not activity.in_activity():
        return None
    for details in activity.info().heartbeat_details[-1:]:
        if isinstance(details, dict):
            return details.get(key)
    return None


def remember(key: str, value: Any) -> None:
    """Leave ``value`` under ``key`` for the next attempt; a no-op outside an activity."""
    if activity.in_activity():
        activity.heartbeat({key: value})


__all__ = ["recalled", "remember"]
