"""The worker's side of quotas: which accounts a run's calls go through, from this worker's config."""

from .plan import QuotaPlanActivities

__all__ = ["QuotaPlanActivities"]
