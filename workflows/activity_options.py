"""Temporal options per activity kind, built from the spec's typed policy."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy

from ..contracts.spec import ActivityPolicy

# Deterministic failures: retrying them only burns time and money.
NON_RETRYABLE_ERRORS = [
    "NonRetryableProviderError",
    "ContractViolationError",
    "InvalidSpecError",
    "SnapshotIntegrityError",
]


def activity_options(policy: ActivityPolicy) -> dict[str, Any]:
    # Only set when asked for: an unset heartbeat timeout keeps the commands of runs in flight unchanged.
    heartbeat = {"heartbeat_timeout": timedelta(seconds=policy.heartbeat_seconds)} if policy.heartbeat_seconds else {}
    return {
        **heartbeat,
        "start_to_close_timeout": timedelta(seconds=policy.start_to_close_seconds),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=policy.initial_interval_seconds),
            maximum_interval=timedelta(seconds=policy.maximum_interval_seconds),
            maximum_attempts=policy.max_attempts,
            non_retryable_error_types=NON_RETRYABLE_ERRORS,
        ),
    }
