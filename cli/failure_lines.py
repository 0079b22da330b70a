"""What a person at a terminal reads when something fails: one line naming the typed error.

Temporal hands a run's failure to the caller wrapped (``WorkflowFailureError``
around ``ActivityError`` around the ``ApplicationError`` whose ``type`` is the
project's error class), and the worker logs each failed call with a ~30-line
traceback. Both bury the cause. Here:

- ``describe(exc)`` unwraps to the innermost cause and names it:
  ``NonRetryableProviderError: OPENAI_API_KEY is not set``; an RPC refusal is
  its status and message (``NOT_FOUND: workflow not found ...``).
- ``configure_logging`` makes every log record one line, and a record that
  carries an exception ends with ``describe`` of it (a failed activity names
  its activity type, workflow id and attempt too). Tracebacks are kept for the
  debug level: ``agentsteps --debug ...`` or ``AGENTSTEPS_LOG_LEVEL=DEBUG``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TerminatedError,
)
from temporalio.exceptions import TimeoutError as TemporalTimeoutError
from temporalio.service import RPCError

LOG_LEVEL_ENV = "AGENTSTEPS_LOG_LEVEL"

# Wrappers that only say where a failure happened; the cause inside says what it was.
_WRAPPERS = (WorkflowFailureError, WorkflowUpdateFailedError, ActivityError, ChildWorkflowError)


def root_cause(exc: BaseException) -> BaseException:
    """The innermost failure under Temporal's wrappers (an ``ApplicationError`` keeps its own type)."""
    seen = 0
    while isinstance(exc, _WRAPPERS) and seen < 20:
        inner = exc.cause
        if inner is None:
            break
        exc, seen = inner, seen + 1
    return exc


def describe(exc: BaseException) -> str:
    """``Type: message`` of the failure's cause, on one line."""
    cause = root_cause(exc)
    if isinstance(cause, ApplicationError):
        return _one_line(f"{cause.type or 'ApplicationError'}: {cause.message}")
    if isinstance(cause, TemporalTimeoutError):
        kind = cause.type.name.lower() if cause.type is not None else "timeout"
        return _one_line(f"TimeoutError: {cause.message or 'timed out'} ({kind})")
    if isinstance(cause, TerminatedError):
        return _one_line(f"terminated: {cause.message}")
    if isinstance(cause, CancelledError):
        return _one_line(f"cancelled: {cause.message}")
    if isinstance(cause, RPCError):
        return _one_line(f"{cause.status.name}: {cause.message}")
    text = str(cause)
    return _one_line(f"{type(cause).__name__}: {text}" if text else type(cause).__name__)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def log_level(debug: bool, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if debug:
        return logging.DEBUG
    named = (env.get(LOG_LEVEL_ENV) or "WARNING").strip().upper()
    level = logging.getLevelName(named)
    return level if isinstance(level, int) else logging.WARNING


class OneLineFormatter(logging.Formatter):
    """``LEVEL logger: message``; an exception becomes ``describe(exc)`` unless tracebacks are wanted."""

    def __init__(self, tracebacks: bool) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self.tracebacks or not record.exc_info:
            return super().format(record)
        exc = record.exc_info[1]
        activity = getattr(record, "temporal_activity", None)
        if isinstance(activity, Mapping) and exc is not None:
            line = (
                f"{record.levelname} call failed: {activity.get('activity_type')} of "
                f"{activity.get('workflow_id')} (attempt {activity.get('attempt')}): {describe(exc)}"
            )
            return line
        message = record.getMessage().splitlines()[0] if record.getMessage() else ""
        return f"{record.levelname} {record.name}: {message}" + (f": {describe(exc)}" if exc is not None else "")


def configure_logging(debug: bool) -> int:
    """Root logging for a CLI process, on stderr; returns the level chosen."""
    level = log_level(debug)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter(tracebacks=level <= logging.DEBUG))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return level


__all__ = ["LOG_LEVEL_ENV", "OneLineFormatter", "configure_logging", "describe", "log_level", "root_cause"]
