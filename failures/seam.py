"""The one seam where the exception tree crosses Temporal: to an ``ApplicationError`` and back.

An activity's exception reaches the workflow as ``ActivityError`` wrapping an
``ApplicationError``; a workflow's reaches the client the same way. Both carry
only a type name, a message, details and whether Temporal may retry. So:

    to_application_error(error, *details)   an AgentStepsError -> ApplicationError
        type            the error's class name (``InvalidProgramResume`` included:
                        the names are persisted compatibility data)
        non_retryable   ``error.retryable is False`` (a class attribute; ``None``
                        leaves it unset: an Update refused, never retried)
        next_retry_delay  a RetryableProviderError's ``retry_after`` (Retry-After)
        details         what the raiser passes: violations, edges, clashes

    from_failure(failure)                   ActivityError / ApplicationError -> the typed error
        the class in the tree named by the failure's type, carrying its message;
        ``None`` for a failure that is not one of ours (a timeout, a cancel,
        an uncaught exception of some other class)

The class is looked up among the tree's loaded classes, never imported by
name, so a failure's type off the wire never decides what gets imported. A
rebuilt error carries the message (``str(error)``) and the failure's
``details``; the fields its constructor would have set (``violation``,
``edges``) are not rebuilt, so code that needs them reads the details.

Contracts stay free of Temporal (``contracts/errors.py`` knows names and
retryability, not ``ApplicationError``); every raise of an ``ApplicationError``
in the package goes through ``to_application_error``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.exceptions import ActivityError, ApplicationError

# Imported for their branches of the tree: a class is found only once it is loaded.
from ..contracts import mcp as _mcp  # noqa: F401
from ..contracts.composition import contract as _composition  # noqa: F401
from ..contracts.errors import AgentStepsError, RetryableProviderError


def to_application_error(error: AgentStepsError, *details: Any) -> ApplicationError:
    """The ``ApplicationError`` Temporal carries for ``error`` (raise it ``from`` what the raiser chooses)."""
    delay = None
    # getattr: a rebuilt error (``with_message``) has no fields its constructor would have set.
    retry_after: float | None = (
        getattr(error, "retry_after", None) if isinstance(error, RetryableProviderError) else None
    )
    if retry_after is not None:
        delay = timedelta(seconds=retry_after)
    return ApplicationError(
        str(error),
        *details,
        type=failure_type(type(error)),
        non_retryable=error.retryable is False,
        next_retry_delay=delay,
    )


def failure_type(cls: type[AgentStepsError]) -> str:
    """The persisted type name of a class of the tree."""
    return cls.__name__


def tree() -> dict[str, type[AgentStepsError]]:
    """Every class of the exception tree by its failure type."""
    found: dict[str, type[AgentStepsError]] = {}
    pending: list[type[AgentStepsError]] = [AgentStepsError]
    while pending:
        cls = pending.pop()
        found[failure_type(cls)] = cls
        pending.extend(cls.__subclasses__())
    return found


def from_failure(failure: BaseException | None) -> AgentStepsError | None:
    """The typed error behind an activity's failure, or ``None`` if it is not one of ours."""
    if isinstance(failure, ActivityError):
        failure = failure.cause
    if not isinstance(failure, ApplicationError) or failure.type is None:
        return None
    cls = tree().get(failure.type)
    if cls is None:
        return None
    # Not through __init__: constructors take fields (a Violation, edges) the failure carries as details.
    return cls.with_message(failure.message, tuple(failure.details))


__all__ = ["failure_type", "from_failure", "to_application_error", "tree"]
