"""``monitor.record``: the monitor's metrics, recorded in an activity so a replay never counts twice."""

from .activities import MonitorActivities

__all__ = ["MonitorActivities"]
