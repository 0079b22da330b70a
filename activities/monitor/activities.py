"""``monitor.record``: the monitor's metrics, set from a finished tick's counts.

Metrics are recorded here and never in workflow code, so a replay cannot count
twice. A retried attempt on the same worker is recognised by its run id and
does not count twice either.

The stalled-tickets gauge lives in whichever worker ran the tick, and a worker
keeps its last value after other workers take over the schedule. So each tick
also exports when it was recorded (the activity's first schedule time: the same
on every attempt), and the dashboard reads the stalled count from the worker
with the newest timestamp per monitor (deploy/grafana/dashboard_rows.py,
``stalled_tickets``). A gauge recorded by the workflow through Temporal's meter
would not help: that meter is per worker process too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

from temporalio import activity

from ...contracts.monitor import MonitorMetrics
from ...contracts.names import MONITOR_RECORD
from ...telemetry.metrics import MONITOR_ESCALATIONS, MONITOR_LAST_TICK, MONITOR_NUDGES, MONITOR_STALLED_TICKETS

_REMEMBERED_RUNS = 1024


class MonitorActivities:
    def __init__(self) -> None:
        self._recorded: OrderedDict[str, None] = OrderedDict()
        self._newest: dict[str, float] = {}

    @activity.defn(name=MONITOR_RECORD)
    async def record(self, metrics: MonitorMetrics) -> None:
        ticked = activity.info().scheduled_time.timestamp()
        # A late retry of an older tick must not overwrite a newer tick's count on this worker.
        if ticked >= self._newest.get(metrics.monitor, 0.0):
            self._newest[metrics.monitor] = ticked
            MONITOR_STALLED_TICKETS.labels(monitor=metrics.monitor).set(metrics.stalled)
            MONITOR_LAST_TICK.labels(monitor=metrics.monitor).set(ticked)
        if metrics.run_id in self._recorded:
            return
        self._recorded[metrics.run_id] = None
        while len(self._recorded) > _REMEMBERED_RUNS:
            self._recorded.popitem(last=False)
        MONITOR_NUDGES.labels(monitor=metrics.monitor).inc(metrics.nudged)
        MONITOR_ESCALATIONS.labels(monitor=metrics.monitor).inc(metrics.escalated)

    def activities(self) -> list[Callable[[MonitorMetrics], Awaitable[None]]]:
        return [self.record]


__all__ = ["MonitorActivities"]
