"""``monitor.record``: the monitor's metrics, set from a finished tick's counts.

Metrics are recorded here and never in workflow code, so a replay cannot count
twice. A retried attempt on the same worker is recognised by its run id and
does not count twice either.
"""

from __future__ import annotations

from collections import OrderedDict

from temporalio import activity

from ..contracts.monitor import MonitorMetrics
from ..contracts.names import MONITOR_RECORD
from ..telemetry.metrics import MONITOR_ESCALATIONS, MONITOR_NUDGES, MONITOR_STALLED_TICKETS

_REMEMBERED_RUNS = 1024


class MonitorActivities:
    def __init__(self) -> None:
        self._recorded: OrderedDict[str, None] = OrderedDict()

    @activity.defn(name=MONITOR_RECORD)
    async def record(self, metrics: MonitorMetrics) -> None:
        MONITOR_STALLED_TICKETS.labels(monitor=metrics.monitor).set(metrics.stalled)
        if metrics.run_id in self._recorded:
            return
        self._recorded[metrics.run_id] = None
        while len(self._recorded) > _REMEMBERED_RUNS:
            self._recorded.popitem(last=False)
        MONITOR_NUDGES.labels(monitor=metrics.monitor).inc(metrics.nudged)
        MONITOR_ESCALATIONS.labels(monitor=metrics.monitor).inc(metrics.escalated)

    def activities(self) -> list:
        return [self.record]


__all__ = ["MonitorActivities"]
