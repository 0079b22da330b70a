"""Every workflow input, update argument and signal argument, decoded where a failure can be answered.

Temporal decodes a handler's declared argument type before any workflow code runs. For a start that
fails the workflow *task*, which Temporal retries forever: a backend in another language that sends
valid JSON of the wrong shape (a spec with tools and no model) got a run that never ended. So every
entry takes the raw payload (``temporalio.common.RawValue``) and decodes it here:

- a start (``start_input``): the run fails at once with ``InvalidSpecError`` (non-retryable), one
  violation per field, each naming its JSON path;
- an update (``update_input``, in its validator): the update is rejected with the same error, before
  it reaches history;
- a signal (``signal_input``): a bad shape is dropped with one log line and
  ``agentsteps_malformed_inputs{kind="signal"}``, never failing the workflow task.

The decode is the workflow's own payload converter, so good input decodes exactly as when the SDK did
it: the commands of a recorded history do not change. A payload the store could not give back still
fails as it did (``PayloadMissingError``); only a wrong shape becomes ``InvalidSpecError``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, FailureError

from ..contracts.errors import InvalidSpecError
from ..contracts.violations import Violation, ViolationKind
from ..failures import to_application_error
from ..telemetry import workflow_metrics

M = TypeVar("M", bound=BaseModel)

_PATHS_NAMED = 8

NO_INPUT = RawValue(Payload())
"""The default of an entry's raw argument: a start or update sent with no argument at all decodes as
this, and fails as a missing input instead of as a call with too few arguments."""


def start_input(raw: Any, model: type[M]) -> M:
    """The start's input as ``model``; a wrong shape fails the run at once (``InvalidSpecError``)."""
    value, error = decoded(raw, model, f"{workflow.info().workflow_type} input")
    if error is not None:
        workflow_metrics.record_malformed_input("start", workflow.info().workflow_type)
        raise error
    assert value is not None
    return value


def update_input(raw: Any, model: type[M], update: str) -> M:
    """An update's argument as ``model``; in a validator a wrong shape rejects the update (``InvalidSpecError``)."""
    value, error = decoded(raw, model, f"{update} update")
    if error is not None:
        raise error
    assert value is not None
    return value


def signal_input(raw: Any, model: type[M], signal: str) -> M | None:
    """A signal's argument as ``model``, or None when its shape is wrong: the signal is dropped, logged and
    counted (a signal has no caller to answer and must never fail the workflow task)."""
    value, error = decoded(raw, model, f"{signal} signal")
    if error is not None:
        workflow.logger.warning("dropped the %s signal: %s", signal, error.message)
        workflow_metrics.record_malformed_input("signal", signal)
    return value


def decoded(raw: Any, model: type[M], what: str) -> tuple[M | None, ApplicationError | None]:
    """``raw`` (a ``RawValue``, or what the SDK already decoded from JSON) as ``model``, or the typed
    failure that says why not, as a non-retryable ``ApplicationError`` of type ``InvalidSpecError``."""
    if raw is NO_INPUT or (isinstance(raw, RawValue) and not raw.payload.metadata):
        return None, _invalid(what, "$", "an input is required")
    try:
        if isinstance(raw, RawValue):
            value = workflow.payload_converter().from_payload(raw.payload, model)
        else:
            value = TypeAdapter(model).validate_python(raw)
    except FailureError:
        raise  # already typed: a payload the store could not give back
    except Exception as exc:  # noqa: BLE001 - any decode failure is the caller's wrong shape
        validation = _validation_error(exc)
        if validation is not None:
            # The first few paths: a hostile value's thousand errors must not make a thousand-line failure.
            error = InvalidSpecError.from_validation(validation, what)
            return None, to_application_error(InvalidSpecError(error.violations[:_PATHS_NAMED]))
        return None, _invalid(what, "$", f"{type(exc).__name__}: {exc}")
    if not isinstance(value, model):
        return None, _invalid(what, "$", f"expected an object, got {type(value).__name__}")
    return value, None


def _validation_error(exc: BaseException) -> ValidationError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ValidationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _invalid(what: str, path: str, message: str) -> ApplicationError:
    return to_application_error(
        InvalidSpecError(
            [Violation(contract=what, phase="pre", kind=ViolationKind.invalid_config, path=path, message=message[:500])]
        )
    )


__all__ = ["NO_INPUT", "decoded", "signal_input", "start_input", "update_input"]
