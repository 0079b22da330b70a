"""The worker: client, workflows, activities and /metrics, from one WorkerSettings.

The same code serves the embedded dev server and a production cluster; only
``settings.temporal_address`` differs.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
import hashlib
import importlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx2
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.worker import Worker, WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from .activities.llm.activities import LLMActivities
from .activities.llm.providers.http_transport import provider_http_client
from .activities.mcp import McpActivities, SecretResolver, build_mcp_activities
from .activities.monitor.activities import MonitorActivities
from .activities.notify import ApprovalNotifier
from .activities.quotas import QuotaPlanActivities
from .activities.sandbox import SandboxActivities, SandboxPool, SnapshotVault, load_snapshot_key
from .activities.sandbox.key_check import check_deployment_key
from .activities.sandbox.snapshots import key_id, previous_snapshot_keys
from .activities.session import SessionForkActivities
from .activities.tools.activities import ToolActivities
from .activities.tools.registry import ToolRegistry
from .activities.tools.source import ToolSource
from .client.connection import build_data_converter, connect
from .client.queue_membership import join_queue, renewing
from .client.quotas import ensure_accounts
from .client.search_attributes import ensure_search_attributes
from .client.settings import load_mcp_config, provider_keys, secret_sources
from .contracts.config.settings import DEMO_TOOL_FACTORIES, PROVIDER_KEY_ENV, WorkerSettings
from .contracts.errors import DeploymentConfigError, QuotaConfigError
from .contracts.names import QUEUE_REGISTRY_TASK_QUEUE
from .contracts.queue_registry import QueueFingerprint
from .storage import payload_unavailable
from .storage.conversations import ConversationStore
from .storage.payload_contexts import contexts_of
from .storage.payload_store import PayloadStore, build_payload_store
from .storage.payload_unavailable import denied_code, terminate_unreadable_runs
from .telemetry.metrics import WORKER_SLOTS, WORKFLOW_REPLAY_SECONDS
from .workflows.agent import AgentWorkflow
from .workflows.monitor import MonitorWorkflow
from .workflows.pipeline import PipelineWorkflow
from .workflows.queue_registry import QueueRegistryWorkflow
from .workflows.quota_account import QuotaAccountWorkflow
from .workflows.quota_gate import warm_tokenizer
from .workflows.session import SessionWorkflow

# Public here (worker.__all__, the docs): defined in client/connection.py so a CLI command that only talks
# to Temporal connects without importing the worker. httpx names its public home the same way.
connect.__module__ = build_data_converter.__module__ = __name__


def check_deployment(settings: WorkerSettings) -> None:
    """Refuse a worker on a cluster that another worker could not take runs over from.

    Several workers on one task queue pass runs between them: each must read
    the payloads and verify the snapshots the others wrote. The embedded
    default (no ``TEMPORAL_ADDRESS``) and an operator's explicit
    ``single_worker`` need neither.
    """
    check_provider_keys(settings)
    if settings.temporal_address is None or settings.single_worker:
        return
    missing = []
    if settings.snapshot_key is None:
        missing.append("a shared snapshot key (set AGENTSTEPS_SNAPSHOT_KEY to the same secret on every worker)")
    if not settings.payload_store.shared:
        missing.append(
            "a payload store every worker can reach (set AGENTSTEPS_PAYLOAD_S3_BUCKET, and AWS_ENDPOINT_URL "
            "for an S3-compatible server such as MinIO)"
        )
    if missing:
        raise DeploymentConfigError(
            f"this worker connects to the Temporal cluster at {settings.temporal_address} but lacks "
            + " and ".join(missing)
            + ". If exactly one worker serves this cluster, say so with AGENTSTEPS_SINGLE_WORKER=1 "
            "(single_worker = true in [worker])."
        )


def production_settings(settings: WorkerSettings) -> WorkerSettings:
    """The settings of a worker that serves a deployment: ``check_deployment`` passed, and only the tools its
    operator configured (the demo tools are for the embedded stack). ``agentsteps worker`` and any worker a
    CLI command is asked to start against a cluster (``--worker``) go through here."""
    check_deployment(settings)
    if settings.tool_factories is None:
        settings = settings.model_copy(update={"tool_factories": []})
    return settings


async def check_snapshot_key(settings: WorkerSettings) -> None:
    """On a cluster: refuse a snapshot key that is not the deployment's (``activities/sandbox/key_check.py``)."""
    if settings.temporal_address is None or settings.single_worker:
        return
    store = build_payload_store(settings)
    try:
        await check_deployment_key(store, load_snapshot_key(settings), previous_snapshot_keys(settings))
    except DeploymentConfigError:
        raise
    except Exception as exc:  # the store's own answer (botocore, a socket): one line naming cause and next step
        raise store_unusable(store.location, exc) from exc
    finally:
        await store.aclose()


def store_unusable(location: str, exc: BaseException) -> DeploymentConfigError:
    """The payload store failed this worker's start-up check: refused (credentials) or not reached."""
    code = denied_code(exc)
    cause = " ".join(f"{type(exc).__name__}: {exc}".split())
    if code is not None:
        return DeploymentConfigError(
            f"the payload store {location} refused this worker's start-up check ({code}): check its credentials "
            "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the pod's role) and the bucket's "
            f"policy, then start it again ({cause})"
        )
    return DeploymentConfigError(
        f"the payload store {location} could not be used for this worker's start-up check: check the bucket "
        f"and AWS_ENDPOINT_URL, then start it again ({cause})"
    )


def check_provider_keys(settings: WorkerSettings) -> None:
    """Refuse to start without the API key of a provider the operator declared required, or without the
    secret of a named key (``provider_keys``; every worker build checks that too)."""
    provider_keys(settings)
    keys = {"openai": settings.providers.openai_api_key, "anthropic": settings.providers.anthropic_api_key}
    missing = [p for p in settings.required_providers if not _has_value(keys[p])]
    if missing:
        raise DeploymentConfigError(
            "required_providers lists "
            + ", ".join(missing)
            + " but the worker has no API key for "
            + ("it" if len(missing) == 1 else "them")
            + ": set "
            + " and ".join(PROVIDER_KEY_ENV[p] for p in missing)
            + " (in Kubernetes, the Secret agentsteps-provider-keys)."
        )


def check_quota_keys(settings: WorkerSettings) -> None:
    """A quota on a key the worker does not declare is refused at start (``load_settings`` refuses it in a
    file; this covers settings built in code), as a ``QuotaConfigError`` naming the quota and the key."""
    quotas = settings.quotas
    problem = quotas.undeclared_key(settings.providers.key_names) or quotas.unreachable_degrade(
        settings.required_providers
    )
    if problem is not None:
        raise QuotaConfigError.with_message(f"$.quotas.{problem}")


def load_registry(settings: WorkerSettings) -> ToolRegistry:
    """Merge every configured tool factory into one registry (the demo tools when none is configured)."""
    merged = ToolRegistry()
    factories = settings.tool_factories if settings.tool_factories is not None else DEMO_TOOL_FACTORIES
    for entry in factories:
        factory = _import_factory(entry)
        for tool in factory(settings):
            merged.add(tool)
    return merged


def _secret(secret: SecretStr | None) -> str:
    return secret.get_secret_value() if secret is not None else ""


def _has_value(secret: SecretStr | None) -> bool:
    return secret is not None and bool(secret.get_secret_value().strip())


def _import_factory(entry: str) -> Callable[[WorkerSettings], ToolRegistry]:
    module_name, _, attr = entry.partition(":")
    if not attr:
        raise ValueError(f"tool factory {entry!r} must look like 'package.module:function'")
    factory: Callable[[WorkerSettings], ToolRegistry] = getattr(importlib.import_module(module_name), attr)
    return factory


@dataclass(frozen=True)
class QueueCheck:
    """How a worker proves to its task queue's registry that it agrees with the workers already there
    (``client/queue_membership.py``); ``running_worker`` joins before it polls, renews while it runs."""

    replace: bool = False
    """Take the queue over even though live workers disagree (``agentsteps worker --replace-fleet``): they are
    told at their next renewal and stop polling."""
    lease_seconds: float = 30.0
    offline_script: str | None = None
    """The digest of the offline model's script when this worker serves it (its URL is its own)."""
    on_replaced: Callable[[str], Awaitable[None]] | None = None
    """Called when another fleet took the queue over; by default the worker shuts down."""


def queue_fingerprint(
    settings: WorkerSettings, registry: ToolRegistry, offline_script: str | None = None
) -> QueueFingerprint:
    """What workers on one queue must share, as hashes (no secret goes in): the snapshot key's id, the tools
    (with their policies, and the MCP servers), where model calls go, and the quotas, budgets and prices."""
    tools = {
        name: schema.model_dump(mode="json", include={"side_effects", "requires_approval", "delivery"})
        for name, schema in registry.schemas().items()
    }
    providers = settings.providers

    def route(provider: str, key: object, url: str) -> str:
        if offline_script is not None:
            return f"offline:{offline_script}"
        named = sorted(providers.named_keys(provider))
        return f"{url} key={'set' if key else 'unset'} keys={','.join(named)}"

    models = {
        "openai": route("openai", providers.openai_api_key, providers.openai_base_url),
        "anthropic": route("anthropic", providers.anthropic_api_key, providers.anthropic_base_url),
        "namespace": settings.namespace,
    }
    quotas = {"quotas": settings.quotas.model_dump(mode="json"), "prices": settings.prices.model_dump(mode="json")}
    return QueueFingerprint(
        key_id=key_id(load_snapshot_key(settings)),
        previous_key_ids=[key_id(k) for k in previous_snapshot_keys(settings)],
        tools=_digest({"tools": tools, "mcp": sorted(load_mcp_config(settings.config_file).servers)}),
        models=_digest(models),
        quotas=_digest(quotas),
    )


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


@asynccontextmanager
async def serving_queue_registries(client: Client) -> AsyncIterator[None]:
    """Serve the queue registries (``QUEUE_REGISTRY_TASK_QUEUE``) from this process, so the first worker of a
    queue is answered. No sticky cache: a registry's task goes to whichever worker process is alive."""
    worker = Worker(
        client,
        task_queue=QUEUE_REGISTRY_TASK_QUEUE,
        workflows=[QueueRegistryWorkflow],
        max_cached_workflows=0,
        workflow_runner=ENGINE_SANDBOX,
    )
    # Its own task, not ``async with``: when the server goes away this worker's fatal error must not cancel
    # the task that serves the engine (``cli/dev.py`` chooses how a lost server ends).
    running = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        with suppress(Exception):
            await asyncio.wait_for(worker.shutdown(), 5)
        running.cancel()
        with suppress(BaseException):
            await running


def workflows() -> list[type]:
    return [AgentWorkflow, PipelineWorkflow, MonitorWorkflow, SessionWorkflow, QuotaAccountWorkflow]


def replayed_workflows() -> list[type]:
    """Every workflow type a deployment runs, the queues' registries included: what ``replay --check`` replays
    (a registry is served by every worker process, so any build may run it)."""
    return [*workflows(), QueueRegistryWorkflow]


def build_worker(
    client: Client,
    settings: WorkerSettings,
    http: httpx2.AsyncClient,
    *,
    registry: ToolRegistry | None = None,
    sources: Sequence[ToolSource] = (),
    task_queue: str | None = None,
    sandbox: SandboxActivities,
    mcp: McpActivities,
    store: PayloadStore | None = None,
    extra_workflows: Sequence[type] = (),
    **worker_options: Any,
) -> Worker:
    conversations = ConversationStore(store or build_payload_store(settings))
    tools = ToolActivities(
        registry if registry is not None else load_registry(settings),
        [mcp.source(), *sources],
        conversations,
        programs=sandbox.resume_carried,  # a program live here resumes inside its call's activity
        # A step's next model call, made inside its tool's activity (late-bound: llm is built below, from tools).
        models=lambda request: llm.call(request),
    )
    plans = QuotaPlanActivities(settings)
    llm = LLMActivities(
        settings.providers,
        http,
        settings.prices,
        conversations,
        describe=tools.describe,
        keys=provider_keys(settings),
        plans=plans.plan_of,
    )
    session_fork = SessionForkActivities(conversations, sandbox)
    worker_options.setdefault("workflow_runner", ENGINE_SANDBOX)
    # The SDK's default (0) cancels every running activity at shutdown: a rolling
    # restart would throw away model calls already paid for and send them again.
    worker_options.setdefault("graceful_shutdown_timeout", timedelta(seconds=settings.graceful_shutdown_seconds))
    sticky = settings.sticky_queue_timeout_seconds
    for option, value in (
        ("max_concurrent_activities", settings.max_concurrent_activities),
        ("max_concurrent_workflow_tasks", settings.max_concurrent_workflow_tasks),
        ("max_cached_workflows", settings.max_cached_workflows),
        ("sticky_queue_schedule_to_start_timeout", None if sticky is None else timedelta(seconds=sticky)),
    ):
        if value is not None:
            worker_options.setdefault(option, value)
    export_capacity(settings, worker_options)
    return Worker(
        client,
        task_queue=task_queue or settings.task_queue,
        workflows=[*workflows(), *extra_workflows],
        activities=[
            llm.call,
            llm.call_resolving_tools,
            llm.call_stored_results,
            llm.call_tool_catalog,
            llm.call_plan_first,
            tools.describe,
            tools.call,
            sandbox.check,
            sandbox.start,
            sandbox.resume,
            sandbox.fork,
            session_fork.bind,
            plans.plan,
            *MonitorActivities().activities(),
            *ApprovalNotifier(settings.approval_webhooks, _secret(settings.console.link_secret)).activities(),
        ],
        **worker_options,
    )


# Temporal's sandbox re-imports a workflow's module for every run it starts. The engine's
# modules are pure (no I/O, time or randomness but workflow.*: DESIGN.md), and every helper the
# workflows call was passed through already; passing the workflow modules too saves ~6 ms CPU a
# run. The sandbox still guards everything else a workflow imports.
class RunAwareRunner(WorkflowRunner):
    """Another runner's instances, each activation marked with its run id (``decoding_for``), so a
    payload the store cannot give back is pinned on the very run that met it, and each payload's
    contexts read from the workflow instance without a round trip into the sandbox (``payload_contexts``)."""

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner

    def prepare_workflow(self, defn: Any) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _RunAwareInstance(self.inner.create_instance(det), det.defn.name or "other")

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


class _RunAwareInstance(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, workflow_type: str) -> None:
        self._inner = inner
        self._contexts = contexts_of(inner)  # asked per payload sequence: no round trip into the sandbox
        self._workflow_type = workflow_type
        self._replayed = 0.0
        """Seconds of replaying activations since the run was last rebuilt from history (sticky-cache miss,
        a task from the normal queue, a query on a run no worker cached): observed at its first live one."""

    def activate(self, act: Any) -> Any:
        replaying = bool(act.is_replaying)
        started = time.perf_counter() if replaying else 0.0
        with payload_unavailable.decoding_for(act.run_id):
            result = self._inner.activate(act)
        if replaying:
            self._replayed += time.perf_counter() - started
        elif self._replayed:
            WORKFLOW_REPLAY_SECONDS.labels(self._workflow_type).observe(self._replayed)
            self._replayed = 0.0
        return result

    def get_serialization_context(self, *args: Any) -> Any:
        return self._contexts.get_serialization_context(*args)

    def get_external_store_context(self, *args: Any) -> Any:
        return self._contexts.get_external_store_context(*args)

    def get_info(self) -> Any:
        return self._inner.get_info()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


ENGINE_SANDBOX = RunAwareRunner(
    SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(__package__ or "agentsteps"),
    )
)


# Gauge kind -> the Worker option that sizes it, and the SDK's default when nothing overrides it.
_SLOT_OPTIONS = {
    "activity": ("max_concurrent_activities", 100),
    "workflow_task": ("max_concurrent_workflow_tasks", 100),
    "cached_workflows": ("max_cached_workflows", 1000),
}


def export_capacity(settings: WorkerSettings, worker_options: dict[str, Any]) -> None:
    """``agentsteps_worker_slots{kind}``: what this worker was sized to, beside Temporal's slots-used gauges."""
    for kind, (option, sdk_default) in _SLOT_OPTIONS.items():
        WORKER_SLOTS.labels(kind).set(worker_options.get(option, sdk_default))
    WORKER_SLOTS.labels("sandbox_processes").set(settings.sandbox_processes or os.cpu_count() or 1)


def build_mcp(settings: WorkerSettings) -> McpActivities:
    """The MCP servers of the settings' config file; secrets resolve in the worker, at connect time."""
    env, secrets_dir = secret_sources(settings)
    return build_mcp_activities(load_mcp_config(settings.config_file), SecretResolver(env, secrets_dir))


def settle_heap() -> None:
    """For a long-running worker process, once its worker is built: keep the garbage collector
    off the startup heap.

    The imported SDKs, schemas and tables are a large heap that lives as long as the process,
    and every workflow task allocates thousands of short-lived objects; with the interpreter's
    defaults the collector re-scanned that heap again and again (1.5 s of 37 s worker CPU in
    ``bench/throughput.py``). Freezing it and collecting young objects less often cut that to
    0.2 s. Not for a process that builds worker after worker (tests): what it freezes is never freed.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)


RETURN_FREED_MEMORY_SECONDS = 60.0


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # Looked up once: find_library runs ldconfig in a subprocess.
    trim: Callable[[int], int] | None = getattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim", None)
    return trim


def return_freed_memory() -> bool:
    """Hand the memory the C allocator holds free back to the system (glibc's ``malloc_trim``); False where
    the C library has none (musl, macOS)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@asynccontextmanager
async def returning_freed_memory(every_seconds: float = RETURN_FREED_MEMORY_SECONDS) -> AsyncIterator[None]:
    """For a long-running worker process: once a minute, the memory freed since goes back to the system.

    glibc keeps freed blocks for reuse, and payloads and replays leave them scattered under live ones, so
    a worker's RSS followed the most sessions it had ever served (``bench/fleet.py``: about 60 KiB a
    session beyond its cache, 589 to 2,434 MiB for three workers after 10,000 sessions closed) while its
    Python objects stayed flat; ``malloc_trim`` took it back to its start. Off the event loop: the trim
    walks the heap."""

    async def trimming() -> None:
        while await asyncio.to_thread(return_freed_memory):
            await asyncio.sleep(every_seconds)

    task = asyncio.create_task(trimming())
    try:
        yield
    finally:
        task.cancel()


def build_sandbox(settings: WorkerSettings, store: PayloadStore | None = None) -> SandboxActivities:
    """Snapshots go through the same payload store as Temporal's large payloads."""
    store = store or build_payload_store(settings)
    vault = SnapshotVault(store, load_snapshot_key(settings), previous_snapshot_keys(settings))
    return SandboxActivities(SandboxPool(max_processes=settings.sandbox_processes), vault)


@asynccontextmanager
async def running_worker(
    client: Client,
    settings: WorkerSettings,
    *,
    registry: ToolRegistry | None = None,
    sources: Sequence[ToolSource] = (),
    task_queue: str | None = None,
    extra_workflows: Sequence[type] = (),
    mcp: McpActivities | None = None,
    queue_check: QueueCheck | None = None,
    **worker_options: Any,
) -> AsyncIterator[Worker]:
    """A started worker with its own HTTP client; both are closed on exit.

    ``mcp`` (default: ``build_mcp(settings)``) is started here (background
    connects, catalog refresh, probes) and closed on exit; pass your own to read
    its ``fleet`` health (``/readyz`` does).

    ``extra_workflows`` (benchmarks, tests) run beside the engine's own on the same task queue;
    ``worker_options`` go to ``temporalio.worker.Worker`` (e.g. ``max_cached_workflows``).

    ``queue_check`` (every ``agentsteps worker`` and ``dev``): before it polls, the worker proves to the queue's
    registry that it shares the store, key, tools, models and quotas of the workers already there, or raises
    ``QueueMismatchError`` naming what differs (``client/queue_membership.py``).
    """
    # Refused before anything starts (accounts, pools): a quota on an undeclared key, a named key's secret unset.
    check_quota_keys(settings)
    provider_keys(settings)
    # Runs upsert the AgentSteps* search attributes: a namespace without them would fail every run's task.
    await ensure_search_attributes(client, client.namespace)
    if settings.quotas.configured:
        await asyncio.to_thread(warm_tokenizer)  # runs under a quota plan count their prompts in the workflow
        await ensure_accounts(client, settings.quotas, task_queue or settings.task_queue)
    # Providers never retry; Temporal owns retries, so the transport must not.
    store = build_payload_store(settings)
    queue = task_queue or settings.task_queue
    exits = AsyncExitStack()
    membership = None
    if queue_check is not None:
        registry = registry if registry is not None else load_registry(settings)
        await exits.enter_async_context(serving_queue_registries(client))
        try:
            membership = await join_queue(
                client,
                store,
                queue,
                queue_fingerprint(settings, registry, queue_check.offline_script),
                worker=f"{worker_options.get('identity') or client.identity} #{secrets.token_hex(3)}",
                replace=queue_check.replace,
                lease_seconds=queue_check.lease_seconds,
            )
        except BaseException:
            await exits.aclose()
            await store.aclose()
            raise
    sandbox = build_sandbox(settings, store)
    mcp = mcp or build_mcp(settings)
    mcp.start()
    try:
        async with provider_http_client(settings.providers.request_timeout_seconds) as http:
            worker = build_worker(
                client,
                settings,
                http,
                registry=registry,
                sources=sources,
                task_queue=task_queue,
                sandbox=sandbox,
                mcp=mcp,
                store=store,
                extra_workflows=extra_workflows,
                **worker_options,
            )
            async with worker:
                if membership is not None:
                    assert queue_check is not None
                    replaced = queue_check.on_replaced or (lambda why: worker.shutdown())
                    await exits.enter_async_context(renewing(membership, replaced))
                reaper = asyncio.create_task(terminate_unreadable_runs(client))
                try:
                    yield worker
                finally:
                    reaper.cancel()
                    await exits.aclose()
    finally:
        await exits.aclose()
        await mcp.aclose()
        await sandbox.pool.close()


__all__ = [
    "build_data_converter",
    "build_mcp",
    "build_worker",
    "check_deployment",
    "connect",
    "load_registry",
    "QueueCheck",
    "queue_fingerprint",
    "running_worker",
    "workflows",
]
