"""Session activities: ``session.fork``, binding a source session's state to a fork of one of its turns."""

from .fork import SessionForkActivities

__all__ = ["SessionForkActivities"]
