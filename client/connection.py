"""A Temporal client as every process of a deployment builds it: ``connect`` and its data converter.

``agentsteps.worker`` re-exports both (their public home); they live here so a CLI command that only
talks to Temporal (``session list``, ``quota``, ``payloads gc``, ``schedule``, the console) connects
without importing the worker's activities, workflows and their SDKs (about 0.3 s of CPU a process).
The payload store's metric hooks are installed here too, so every process that reads or writes the
store counts it the same way.
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.runtime import Runtime
from temporalio.service import GrpcCompression

from ..contracts.config.settings import WorkerSettings
from ..storage import payload_unavailable, store_requests
from ..storage.payload_store import PayloadStore, build_payload_store
from ..telemetry.metrics import PAYLOAD_STORE_DENIED, count_store_request
from ..telemetry.runtime import build_runtime
from ..telemetry.tracing import tracing_interceptors

_runtime: Runtime | None = None


if PAYLOAD_STORE_DENIED.inc not in payload_unavailable.on_denied:
    payload_unavailable.on_denied.append(PAYLOAD_STORE_DENIED.inc)
if count_store_request not in store_requests.on_request:
    store_requests.on_request.append(count_store_request)


def _process_runtime(settings: WorkerSettings) -> Runtime:
    """One Temporal runtime per process: each build replaces the metrics collector."""
    global _runtime
    if _runtime is None:
        _runtime = build_runtime(settings)
    return _runtime


_COMPRESSION = {"none": GrpcCompression.NONE, "gzip": GrpcCompression.GZIP}


def build_data_converter(settings: WorkerSettings, store: PayloadStore | None = None) -> DataConverter:
    """The data converter of every client and worker of a deployment: pydantic payloads, and those of 256 KiB
    or more in the shared payload store (``connect`` uses it; a client that starts runs with large inputs or
    reads large results needs it). Pass the worker's ``PayloadStore`` so snapshots and payloads share one
    driver."""
    return (store or build_payload_store(settings)).data_converter()


async def connect(settings: WorkerSettings, address: str | None = None) -> Client:
    # Interceptors go on the client only; workers inherit them (twice would trace twice).
    return await Client.connect(
        address or settings.temporal_address or f"127.0.0.1:{settings.dev_port}",
        namespace=settings.namespace,
        data_converter=build_data_converter(settings),
        runtime=_process_runtime(settings),
        grpc_compression=_COMPRESSION[settings.temporal_grpc_compression],
        interceptors=tracing_interceptors(settings),
    )
