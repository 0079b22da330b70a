"""A payload that cannot be found or verified fails the run, typed; it never fails a task forever.

Temporal decodes external-storage references while it builds a workflow
activation, before any workflow code runs. An exception there fails the
workflow *task*, which the server retries forever: the run hangs. So the
retrieving driver never raises for an answer that will not change:

| the store says                                  | becomes                        |
|-------------------------------------------------|--------------------------------|
| no such object, no such bucket                  | ``PayloadMissingError``        |
| bytes that do not match their digest            | ``PayloadIntegrityError``      |
| a claim for a driver this worker does not have  | ``PayloadMissingError``        |
| a malformed claim (no digest, no key)           | ``PayloadIntegrityError``      |
| access denied, bad credentials or signature     | raised, counted: retried       |
| anything else (network down, 5xx, timeouts)     | raised: the task is retried    |

Access denied is this worker's answer, not the payload's: a pod with wrong
credentials or a narrower policy must not end a run that healthy pods can
read. It fails only its own attempt (retried, possibly by another worker),
counts ``agentsteps_payload_store_denied_total`` and logs, and the
``AgentStepsPayloadStoreDenied`` alert names the pod.

Instead it returns a marker payload (encoding ``agentsteps/unavailable``)
holding the error. The payload converter turns the marker into a
non-retryable ``ApplicationError`` when the value is converted: in workflow
code that fails the run (the SDK fails the workflow, not the task, on a
``FailureError`` raised by payload conversion), in an activity it fails the
attempt, in a client it raises from ``result()``. The message names the
digest and the store.

One case needs more. A worker that takes a run over *replays* its history;
a failure raised while replaying an old event cannot become the run's
failure, because history already says what came next (Temporal reports a
nondeterminism error and retries the task forever). So the converter also
reports the workflow run it converts for, and ``terminate_unreadable_runs`` (a
task beside every worker) terminates that run, by its run id, with the reason
``PayloadMissingError: <message>`` if it is still running a moment later:
still bounded, still typed by its reason. (A run that failed typed in the
first place is closed by then and left alone.) Never by workflow id alone: a
session that has continued as new since must not lose its current run, and a
marker whose run is not known terminates nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    ActivitySerializationContext,
    EncodingPayloadConverter,
    ExternalStorage,
    SerializationContext,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from ..contracts.errors import PayloadIntegrityError, PayloadMissingError, PayloadStoreDeniedError
from ..failures import to_application_error
from .compact_payloads import JSON_PLAIN, CompactJSONPayloadConverter

UNAVAILABLE_ENCODING = "agentsteps/unavailable"
logger = logging.getLogger(__name__)

# Runs that met an unreadable payload: (workflow id, run id when known, reason). Written from the
# workflow thread by the converter, drained by ``terminate_unreadable_runs`` on the worker's loop.
_UNREADABLE_RUNS: queue.SimpleQueue[tuple[str, str | None, str]] = queue.SimpleQueue()

# S3 error codes that prove the object is not there.
_MISSING_CODES = {"NoSuchKey", "404", "NotFound", "NoSuchBucket"}
# S3 error codes that say this worker may not read it: its own fault, never the run's.
_DENIED_CODES = {
    "AccessDenied",
    "403",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "AllAccessDisabled",
    "AccountProblem",
}


on_denied: list[Callable[[], None]] = []
"""Called once per refused read: the worker adds its ``agentsteps_payload_store_denied_total`` counter
(storage/ records no metrics itself)."""


def unavailable_payload(error: PayloadIntegrityError, run_id: str | None = None) -> Payload:
    body = {"type": type(error).__name__, "message": str(error)}
    if run_id:
        body["run_id"] = run_id
    return Payload(metadata={"encoding": UNAVAILABLE_ENCODING.encode()}, data=json.dumps(body).encode())


def run_id_of(payload: Payload) -> str | None:
    """The workflow run whose activation met this marker, when the worker knew it."""
    return json.loads(payload.data).get("run_id") or None


def error_of(payload: Payload) -> PayloadIntegrityError | None:
    """The error a marker payload carries, or None for a real payload."""
    if payload.metadata.get("encoding") != UNAVAILABLE_ENCODING.encode():
        return None
    body = json.loads(payload.data)
    kind = PayloadMissingError if body.get("type") == PayloadMissingError.__name__ else PayloadIntegrityError
    return kind(body.get("message", "payload unavailable"))


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def denied_code(exc: BaseException) -> str | None:
    """The S3 code when the store refused this worker (anywhere in the chain), else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if _code(seen) in _DENIED_CODES:
            return _code(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def classify(exc: BaseException, digest: str, location: str) -> PayloadIntegrityError | None:
    """The typed error for a definitive store answer, or None for a failure to retry (an outage, or
    a refusal of this worker: see ``denied_code``)."""
    if denied_code(exc) is not None:
        return None
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PayloadIntegrityError):
            return seen
        code = _code(seen)
        if code in _MISSING_CODES:
            return PayloadMissingError(f"payload sha256:{digest} is not readable from {location} ({code})")
        if isinstance(seen, ValueError) and "integrity check failed" in str(seen):
            return PayloadIntegrityError(f"payload sha256:{digest} in {location} does not match its digest")
        if isinstance(seen, KeyError | ValueError):
            # Drivers raise these for claims they cannot use, never for an outage.
            return PayloadIntegrityError(f"payload sha256:{digest}: unusable claim for {location} ({seen!r})")
        seen = seen.__cause__ or seen.__context__
    return None


class TypedRetrievalDriver(StorageDriver):
    """Wraps the store's driver for ``ExternalStorage``: definitive failures become markers."""

    def __init__(self, inner: StorageDriver, location: str, run_id: str | None = None) -> None:
        self.inner = inner
        self.location = location
        self.run_id = run_id
        """The workflow run whose activation this retrieval decodes, when known (its markers carry it)."""

    def for_run(self, run_id: str | None) -> TypedRetrievalDriver:
        return self if run_id == self.run_id else TypedRetrievalDriver(self.inner, self.location, run_id)

    def name(self) -> str:
        return self.inner.name()

    def type(self) -> str:
        return self.inner.type()

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return await self.inner.store(context, payloads)

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        try:
            return await self.inner.retrieve(context, claims)
        except Exception:
            if len(claims) == 1:
                return [await self._one(context, claims[0])]
        # One claim at a time, so a single missing payload does not hide the others.
        return [await self._one(context, claim) for claim in claims]

    async def _one(self, context: StorageDriverRetrieveContext, claim: StorageDriverClaim) -> Payload:
        digest = claim.claim_data.get("hash_value", "?")
        try:
            [payload] = await self.inner.retrieve(context, [claim])
            return payload
        except Exception as exc:
            denied = denied_code(exc)
            if denied is not None:
                for listener in on_denied:
                    listener()
                logger.error(
                    "the payload store %s refused this worker reading sha256:%s (%s): check this pod's "
                    "credentials; the attempt is retried and the run left alone",
                    self.location,
                    digest,
                    denied,
                )
                raise PayloadStoreDeniedError(
                    f"payload sha256:{digest}: {self.location} refused this worker ({denied}); retried"
                ) from exc
            typed = classify(exc, digest, self.location)
            if typed is None:
                raise
            return unavailable_payload(typed, self.run_id)


@dataclasses.dataclass(frozen=True)
class TypedExternalStorage(ExternalStorage):
    """``ExternalStorage`` that answers a claim for an unknown driver with a missing payload."""

    location: str = ""

    def _get_driver_by_name(self, name: str) -> StorageDriver:
        driver = self._driver_map.get(name)
        if driver is None:
            return ForeignStoreDriver(name, self.location, self._run_id())
        return driver.for_run(self._run_id()) if isinstance(driver, TypedRetrievalDriver) else driver

    def _run_id(self) -> str | None:
        # Bound by the worker for each workflow activation it decodes (the SDK's store context).
        target = self._store_context.target
        return getattr(target, "run_id", None) if isinstance(target, StorageDriverWorkflowInfo) else None


class ForeignStoreDriver(StorageDriver):
    """Stands in for a driver another worker used and this one does not have (e.g. a local
    directory on another machine): every claim is a missing payload, named with its store."""

    def __init__(self, driver_name: str, location: str, run_id: str | None = None) -> None:
        self._name = driver_name
        self._location = location
        self._run_id = run_id

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return self._name

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        raise RuntimeError(f"{self._name} is not this worker's payload store")  # never selected

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return [
            unavailable_payload(
                PayloadMissingError(
                    f"payload sha256:{c.claim_data.get('hash_value', '?')} was stored in {self._name} "
                    f"(another worker's store), which this worker cannot read; it uses {self._location}"
                ),
                self._run_id,
            )
            for c in claims
        ]


class _UnavailablePayloadConverter(EncodingPayloadConverter):
    def __init__(self, context: SerializationContext | None = None) -> None:
        self._context = context

    @property
    def encoding(self) -> str:
        return UNAVAILABLE_ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        return None  # only ever decoded

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        error = error_of(payload)
        assert error is not None
        failure = to_application_error(error)
        workflow_id = getattr(self._context, "workflow_id", None)
        if workflow_id:
            run_id = run_id_of(payload) or getattr(_activation, "run_id", None)
            _UNREADABLE_RUNS.put((workflow_id, run_id, f"{failure.type}: {failure.message}"))
        raise failure


@functools.cache
def _process_converters() -> tuple[EncodingPayloadConverter, ...]:
    return (*PydanticPayloadConverter().converters.values(), _UnavailablePayloadConverter())


@functools.cache
def _compact_json() -> CompactJSONPayloadConverter:
    full = next(c for c in _process_converters() if isinstance(c, PydanticJSONPlainPayloadConverter))
    return CompactJSONPayloadConverter(full)


class AgentStepsPayloadConverter(PydanticPayloadConverter):
    """The pydantic converter, plus the marker of a payload the store could not give back."""

    def __init__(self) -> None:
        # Temporal builds one of these for every serialization context it derives (several per
        # workflow task, most thrown away at once): build the converters once per process, which
        # also gives every context the one type-adapter cache.
        self._set_converters(*_process_converters())

    def with_context(self, context: SerializationContext) -> AgentStepsPayloadConverter:
        # The marker converter learns which workflow it converts for; the JSON converter (and its
        # type-adapter cache) is shared, not rebuilt per context as the composite default would.
        bound = copy.copy(self)
        bound.converters = {**self.converters, UNAVAILABLE_ENCODING.encode(): _UnavailablePayloadConverter(context)}
        if isinstance(context, ActivitySerializationContext):
            # An activity's input and result are read only by the engine: written without their defaults.
            bound.converters[JSON_PLAIN] = _compact_json()
        return bound


class ActivityResultPayloadConverter(AgentStepsPayloadConverter):
    """What an activity worker encodes its results with: the SDK binds the activity's context, then rebuilds the
    payload converter without it when it adds the store's context (``ContextCachingDataConverter``). Its results
    are written without their defaults too; the marker converter stays unbound, as the SDK leaves it."""

    def __init__(self) -> None:
        super().__init__()
        self.converters = {**self.converters, JSON_PLAIN: _compact_json()}


async def terminate_unreadable_runs(client: Client, every: float = 0.2, grace: float = 1.0) -> None:
    """Terminate each reported run still running after ``grace`` seconds (runs until cancelled).

    Always by the run id of the very run that met the payload, never whatever run holds the
    workflow id now (a session may have continued as new since): a report without one terminates
    nothing and is logged.
    """
    while True:
        reported: dict[tuple[str, str | None], str] = {}
        while not _UNREADABLE_RUNS.empty():
            workflow_id, run_id, reason = _UNREADABLE_RUNS.get_nowait()
            reported.setdefault((workflow_id, run_id), reason)
        if reported:
            await asyncio.sleep(grace)  # a run that failed typed is closed by now
        for (workflow_id, run_id), reason in reported.items():
            if run_id is None:
                logger.error(
                    "workflow %s met an unreadable payload (%s) in a run this worker could not name: "
                    "nothing terminated",
                    workflow_id,
                    reason,
                )
                continue
            handle = client.get_workflow_handle(workflow_id, run_id=run_id)
            try:
                if (await handle.describe()).raw_description.workflow_execution_info.status == (
                    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
                ):
                    await handle.terminate(reason=reason)
                    logger.error("terminated workflow %s run %s: %s", workflow_id, run_id, reason)
            except Exception:  # the server is away: the next replay reports it again
                logger.warning("could not terminate workflow %s run %s", workflow_id, run_id, exc_info=True)
        await asyncio.sleep(every)


_activation = threading.local()


@contextlib.contextmanager
def decoding_for(run_id: str) -> Iterator[None]:
    """Markers converted in this thread meanwhile belong to run ``run_id`` (the worker wraps every
    workflow activation in it: the SDK tells payload converters the workflow id, never the run)."""
    before = getattr(_activation, "run_id", None)
    _activation.run_id = run_id
    try:
        yield
    finally:
        _activation.run_id = before
