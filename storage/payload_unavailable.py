"""A payload that cannot be found or verified fails the run, typed; it never fails a task forever.

Temporal decodes external-storage references while it builds a workflow
activation, before any workflow code runs. An exception there fails the
workflow *task*, which the server retries forever: the run hangs. So the
retrieving driver never raises for an answer that will not change:

| the store says                                  | becomes                        |
|-------------------------------------------------|--------------------------------|
| no such object, no such bucket, access denied   | ``PayloadMissingError``        |
| bytes that do not match their digest            | ``PayloadIntegrityError``      |
| a claim for a driver this worker does not have  | ``PayloadMissingError``        |
| a malformed claim (no digest, no key)           | ``PayloadIntegrityError``      |
| anything else (network down, 5xx, timeouts)     | raised: the task is retried    |

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
reports the workflow it converts for, and ``terminate_unreadable_runs`` (a
task beside every worker) terminates it with the reason
``PayloadMissingError: <message>`` if it is still running a moment later:
still bounded, still typed by its reason. (A run that failed typed in the
first place is closed by then and left alone.)
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import json
import logging
import queue
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    EncodingPayloadConverter,
    ExternalStorage,
    SerializationContext,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from ..contracts.errors import PayloadIntegrityError, PayloadMissingError
from ..failures import to_application_error

UNAVAILABLE_ENCODING = "agentsteps/unavailable"
logger = logging.getLogger(__name__)

# Workflows that met an unreadable payload: (workflow id, reason). Written from the workflow
# thread by the converter, drained by ``terminate_unreadable_runs`` on the worker's loop.
_UNREADABLE_RUNS: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()

# S3 error codes that are an answer, not an outage.
_MISSING_CODES = {"NoSuchKey", "404", "NotFound", "NoSuchBucket", "AccessDenied", "403", "InvalidAccessKeyId"}


def unavailable_payload(error: PayloadIntegrityError) -> Payload:
    body = {"type": type(error).__name__, "message": str(error)}
    return Payload(metadata={"encoding": UNAVAILABLE_ENCODING.encode()}, data=json.dumps(body).encode())


def error_of(payload: Payload) -> PayloadIntegrityError | None:
    """The error a marker payload carries, or None for a real payload."""
    if payload.metadata.get("encoding") != UNAVAILABLE_ENCODING.encode():
        return None
    body = json.loads(payload.data)
    kind = PayloadMissingError if body.get("type") == PayloadMissingError.__name__ else PayloadIntegrityError
    return kind(body.get("message", "payload unavailable"))


def classify(exc: BaseException, digest: str, location: str) -> PayloadIntegrityError | None:
    """The typed error for a definitive store answer, or None for a transient failure."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, PayloadIntegrityError):
            return seen
        code = str(getattr(seen, "response", {}).get("Error", {}).get("Code", "")) if hasattr(seen, "response") else ""
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

    def __init__(self, inner: StorageDriver, location: str) -> None:
        self.inner = inner
        self.location = location

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
        try:
            [payload] = await self.inner.retrieve(context, [claim])
            return payload
        except Exception as exc:
            typed = classify(exc, claim.claim_data.get("hash_value", "?"), self.location)
            if typed is None:
                raise
            return unavailable_payload(typed)


@dataclasses.dataclass(frozen=True)
class TypedExternalStorage(ExternalStorage):
    """``ExternalStorage`` that answers a claim for an unknown driver with a missing payload."""

    location: str = ""

    def _get_driver_by_name(self, name: str) -> StorageDriver:
        return self._driver_map.get(name) or ForeignStoreDriver(name, self.location)


class ForeignStoreDriver(StorageDriver):
    """Stands in for a driver another worker used and this one does not have (e.g. a local
    directory on another machine): every claim is a missing payload, named with its store."""

    def __init__(self, driver_name: str, location: str) -> None:
        self._name = driver_name
        self._location = location

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
            unavailable_payload(PayloadMissingError(
                f"payload sha256:{c.claim_data.get('hash_value', '?')} was stored in {self._name} "
                f"(another worker's store), which this worker cannot read; it uses {self._location}"
            ))
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
            _UNREADABLE_RUNS.put((workflow_id, f"{failure.type}: {failure.message}"))
        raise failure


@functools.cache
def _process_converters() -> tuple[EncodingPayloadConverter, ...]:
    return (*PydanticPayloadConverter().converters.values(), _UnavailablePayloadConverter())


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
        return bound


async def terminate_unreadable_runs(client: Client, every: float = 0.2, grace: float = 1.0) -> None:
    """Terminate each reported workflow still running after ``grace`` seconds (runs until cancelled)."""
    while True:
        reported: dict[str, str] = {}
        while not _UNREADABLE_RUNS.empty():
            workflow_id, reason = _UNREADABLE_RUNS.get_nowait()
            reported.setdefault(workflow_id, reason)
        if reported:
            await asyncio.sleep(grace)  # a run that failed typed is closed by now
        for workflow_id, reason in reported.items():
            handle = client.get_workflow_handle(workflow_id)
            try:
                if (await handle.describe()).raw_description.workflow_execution_info.status == (
                    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
                ):
                    await handle.terminate(reason=reason)
                    logger.error("terminated workflow %s: %s", workflow_id, reason)
            except Exception:  # the server is away: the next replay reports it again
                logger.warning("could not terminate workflow %s", workflow_id, exc_info=True)
        await asyncio.sleep(every)
