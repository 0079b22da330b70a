"""``llm.call``: the activity, its providers on the official SDKs, its metrics and the token stream."""

from .activities import LLMActivities

__all__ = ["LLMActivities"]
