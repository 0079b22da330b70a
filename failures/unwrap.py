"""Temporal's client-side wrappers, taken off in one place: a caller catches the typed error.

A run's failure reaches a client as ``WorkflowFailureError`` (around an
``ActivityError`` or a ``ChildWorkflowError``, around the ``ApplicationError``);
a refused or failed Update as ``WorkflowUpdateFailedError`` around the same.
The class of the tree is only in a ``__cause__``, so ``except SessionBusyError``
would catch nothing. Here:

    typed_cause(exc)      the outermost failure under the wrappers that is one of
                          ours, rebuilt by ``from_failure``; ``None`` when none is
                          (a timeout, a termination, an uncaught exception of
                          another class: the caller keeps Temporal's error)
    typed_failures()      a ``with`` block that re-raises a wrapped failure of
                          ours as its typed error, ``from`` the wrapper (kept for
                          the traceback), and anything else unchanged

An ``RPCError`` is not unwrapped here: ``NOT_FOUND`` means "never existed" or
"has ended" depending on what the caller asked, so each client function
words it (``SessionNotFoundError``, ``RunNotFoundError``, ``SessionClosedError``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError

from ..contracts.errors import AgentStepsError
from .seam import from_failure

_WRAPPED = (WorkflowFailureError, WorkflowUpdateFailedError)


def typed_cause(exc: BaseException) -> AgentStepsError | None:
    """The outermost failure of ours under Temporal's wrappers, or ``None``."""
    cause: BaseException | None = exc
    for _ in range(20):  # a chain is a few links; a cycle must not hang a caller
        if cause is None:
            return None
        error = from_failure(cause)
        if error is not None:
            return error
        cause = cause.__cause__
    return None


@contextmanager
def typed_failures() -> Iterator[None]:
    """Re-raise a ``WorkflowFailureError`` / ``WorkflowUpdateFailedError`` of ours as its typed error."""
    try:
        yield
    except _WRAPPED as exc:
        error = typed_cause(exc)
        if error is None:
            raise
        raise error from exc


__all__ = ["typed_cause", "typed_failures"]
