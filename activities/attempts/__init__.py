"""What an activity's earlier attempts leave for the next one.

Temporal hands an attempt's last heartbeat details to the next attempt of the
same activity, even when the attempt failed: the one place a retried activity
can learn what its earlier attempts saw (the LLM activity counts the 429s it
met, the MCP fleet when its server was first found unavailable). So every
heartbeat of an activity that carries something must carry all of it: a bare
liveness heartbeat (``keep_alive``) would otherwise erase it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from temporalio import activity

_OWN: OrderedDict[bytes, dict[str, Any]] = OrderedDict()
"""What each running attempt remembered itself, by task token; bounded, since a failed attempt never says
it ended (far more entries than a worker runs attempts at once)."""
_OWN_KEPT = 4096


def recalled(key: str) -> Any:
    """``key`` as the previous attempt's last heartbeat left it (``None`` on a first attempt or outside one)."""
    if not activity.in_activity():
        return None
    return _previous().get(key)


def remember(key: str, value: Any) -> None:
    """Leave ``value`` under ``key`` for the next attempt (beside what else is carried); a no-op outside an activity."""
    if activity.in_activity():
        token = activity.info().task_token
        _OWN.setdefault(token, {})[key] = value
        _OWN.move_to_end(token)
        while len(_OWN) > _OWN_KEPT:
            _OWN.popitem(last=False)
        keep_alive()


def keep_alive() -> None:
    """A liveness heartbeat that carries on what earlier attempts and this one remembered."""
    if activity.in_activity():
        carried = {**_previous(), **_OWN.get(activity.info().task_token, {})}
        if carried:
            activity.heartbeat(carried)
        else:
            activity.heartbeat()


def _previous() -> dict[str, Any]:
    for details in activity.info().heartbeat_details[-1:]:
        if isinstance(details, dict):
            return details
    return {}


__all__ = ["keep_alive", "recalled", "remember"]
