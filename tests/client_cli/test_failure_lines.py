"""What a failed command prints: the typed cause on one line; tracebacks only at debug level."""

from __future__ import annotations

import logging
import sys

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.service import RPCError, RPCStatusCode

from agentsteps.cli.failure_lines import OneLineFormatter, describe, log_level

pytestmark = pytest.mark.fast


def _activity_failure(cause: BaseException) -> WorkflowFailureError:
    activity = ActivityError(
        "Activity task failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="w",
        activity_type="llm.call",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    activity.__cause__ = cause
    failure = WorkflowFailureError(cause=activity)
    return failure


def test_a_failed_run_names_the_typed_error_under_temporals_wrappers():
    cause = ApplicationError("OPENAI_API_KEY is not set", type="NonRetryableProviderError", non_retryable=True)
    assert describe(_activity_failure(cause)) == "NonRetryableProviderError: OPENAI_API_KEY is not set"


def test_an_rpc_refusal_is_its_status_and_message_on_one_line():
    exc = RPCError("workflow execution\nalready completed", RPCStatusCode.NOT_FOUND, b"")
    assert describe(exc) == "NOT_FOUND: workflow execution already completed"


def _record(**extra) -> logging.LogRecord:
    try:
        raise ApplicationError("quota spent", type="RetryableProviderError")
    except ApplicationError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "temporalio.activity",
        logging.WARNING,
        __file__,
        1,
        "Completing activity as failed ({'activity_id': '1'})",
        None,
        exc_info,
    )
    record.__dict__.update(extra)
    return record


def test_a_failed_call_is_one_log_line_naming_the_activity_the_run_and_the_cause():
    activity = {"activity_type": "llm.call", "workflow_id": "agent-x", "attempt": 3}
    line = OneLineFormatter(tracebacks=False).format(_record(temporal_activity=activity))

    assert line == "WARNING call failed: llm.call of agent-x (attempt 3): RetryableProviderError: quota spent"


def test_any_other_record_with_an_exception_is_one_line_too_and_debug_keeps_the_traceback():
    brief = OneLineFormatter(tracebacks=False).format(_record())
    full = OneLineFormatter(tracebacks=True).format(_record())

    assert "\n" not in brief and brief.endswith("RetryableProviderError: quota spent")
    assert "Traceback (most recent call last)" in full


def test_the_log_level_comes_from_debug_or_the_environment():
    assert log_level(True, {}) == logging.DEBUG
    assert log_level(False, {"AGENTSTEPS_LOG_LEVEL": "debug"}) == logging.DEBUG
    assert log_level(False, {"AGENTSTEPS_LOG_LEVEL": "info"}) == logging.INFO
    assert log_level(False, {"AGENTSTEPS_LOG_LEVEL": "nonsense"}) == logging.WARNING
    assert log_level(False, {}) == logging.WARNING
