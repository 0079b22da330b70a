"""Whether a CLI process runs a worker of its own: the rule that keeps two workers from disagreeing.

Workers that share a task queue take each other's tasks, so they must serve
the same tools and the same models: otherwise a run's outcome depends on
which worker happened to poll first (a model call failing with "no API key"
on one worker while the other has the key; a tool "not registered" on a
laptop that joined a production queue). The rule:

- **A cluster is served by its deployed workers.** With ``TEMPORAL_ADDRESS``
  set, ``run``, ``chat`` and ``session`` are clients: they poll nothing unless
  told to with ``--worker``, and such a worker goes through the start-up
  checks of ``agentsteps worker`` (``check_deployment``, only configured
  tools).
- **On the embedded stack, one worker serves the queue.** When a worker
  already polls it (``agentsteps dev``), the command uses that worker and says
  so; only when none does, it starts its own. ``agentsteps dev`` refuses to
  start beside another worker on its queue.
- **Asked-for workers must agree.** A worker started on a queue where others
  poll (``--worker``) must have the same configuration fingerprint (tools,
  approval and delivery policy, MCP servers, where model calls go), which
  every agentsteps worker puts in its Temporal identity; otherwise it is
  refused with ``StackConflictError``.
- **The demo's workers are its own.** ``agentsteps demo`` runs on task queues
  private to its process, so it works beside ``agentsteps dev`` (and its runs
  stay browsable in dev's UI).

Why this shape and not a private queue for every CLI worker: a session lives
for days and must be served after the ``chat`` that started it exits; a
private queue would strand it. Why not only a fingerprint check: a newcomer
with ``agentsteps dev`` running expects ``run`` to just work, on dev's worker.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Literal

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError

from ..activities.tools import ToolRegistry
from ..client.dev_server import Stack, embedded_temporal
from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import StackConflictError

WorkerMode = Literal["auto", "yes", "no"]

# A polling worker re-polls at least once a minute; a poller not seen for longer has gone.
POLLER_FRESH_SECONDS = 75.0
_FINGERPRINT_TAG = "config="


@dataclass(frozen=True)
class Poller:
    identity: str
    seconds_ago: float

    @property
    def fingerprint(self) -> str | None:
        for part in self.identity.split():
            if part.startswith(_FINGERPRINT_TAG):
                return part[len(_FINGERPRINT_TAG) :]
        return None


async def live_pollers(client: Client, task_queue: str) -> list[Poller]:
    """Workers polling ``task_queue`` (workflow or activity tasks) within the last minute or so."""
    seen: dict[str, float] = {}
    now = time.time()
    for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        answer = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=kind
            )
        )
        for poller in answer.pollers:
            ago = max(0.0, now - poller.last_access_time.ToSeconds()) if poller.HasField("last_access_time") else 0.0
            if ago <= POLLER_FRESH_SECONDS and not _exited_here(poller.identity):
                seen[poller.identity] = min(ago, seen.get(poller.identity, ago))
    return [Poller(identity, ago) for identity, ago in sorted(seen.items())]


def _exited_here(identity: str) -> bool:
    """A poller of this machine (identity ``pid@host ...``, the SDK's form) whose process is gone.

    The server lists a poller until its long poll would have timed out, so a
    ``chat`` that exited a moment ago still looks alive; on this machine the
    process table says otherwise. Pollers of other machines are judged by age.
    """
    who = identity.split(" ", 1)[0]
    pid, _, host = who.partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def fingerprint(settings: WorkerSettings, registry: ToolRegistry, offline_script: str | None = None) -> str:
    """What two workers on one queue must agree on, as 12 hex digits (no secret goes in).

    ``offline_script`` is the digest of the offline model's script when the
    worker serves it: two offline workers with one script answer alike, though
    each has its own model server on its own port.
    """
    from ..client.settings import load_mcp_config

    tools = {
        name: schema.model_dump(mode="json", include={"side_effects", "requires_approval", "delivery"})
        for name, schema in registry.schemas().items()
    }
    mcp = load_mcp_config(settings.config_file)
    providers = settings.providers

    def route(provider: str, key: object, url: str) -> str:
        if offline_script is not None:
            return f"offline:{offline_script}"
        # The named keys' names (never their variables' values): a run naming a key one worker lacks would
        # fail on that worker only. Unnamed, the line is what it always was, so older workers still agree.
        named = sorted(providers.named_keys(provider))
        return f"{url} key={'set' if key else 'unset'}" + (f" keys={','.join(named)}" if named else "")

    described = {
        "tools": tools,
        "mcp": sorted(mcp.servers),
        "openai": route("openai", providers.openai_api_key, providers.openai_base_url),
        "anthropic": route("anthropic", providers.anthropic_api_key, providers.anthropic_base_url),
        "namespace": settings.namespace,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:12]


def worker_identity(role: str, config_fingerprint: str) -> str:
    """The Temporal identity of a worker this package starts: who, what for, and its fingerprint."""
    return f"{os.getpid()}@{socket.gethostname()} agentsteps-{role} {_FINGERPRINT_TAG}{config_fingerprint}"


@dataclass(frozen=True)
class WorkerPlan:
    start: bool
    """Run a worker in this process."""
    note: str
    """One line for stderr saying who serves the queue."""


async def plan_worker(
    client: Client,
    stack: Stack,
    task_queue: str,
    mode: WorkerMode,
    config_fingerprint: str | None = None,
) -> WorkerPlan:
    """Decide whether this process polls ``task_queue`` (see the module docstring for the rule)."""
    try:
        pollers = await live_pollers(client, task_queue)
    except RPCError as exc:  # a cluster may not let this identity describe task queues
        if mode == "no" or (mode == "auto" and stack.cluster):
            return WorkerPlan(
                False,
                f"task queue {task_queue!r} is served by the cluster's workers "
                f"(its pollers could not be listed: {exc.status.name})",
            )
        raise StackConflictError(
            f"cannot list who polls task queue {task_queue!r} on {stack.address} ({exc.status.name}: {exc.message}), "
            "so a worker here could disagree with one already there; use the workers there (--no-worker)."
        ) from None
    who = ", ".join(p.identity for p in pollers[:3])
    if mode == "no" or (mode == "auto" and (stack.cluster or pollers)):
        if pollers:
            return WorkerPlan(False, f"task queue {task_queue!r} is served by the worker(s) already polling it: {who}")
        if stack.started_here:  # a server this command just started: nothing else can ever poll it
            raise StackConflictError(
                f"--no-worker, but nothing serves task queue {task_queue!r}: the Temporal server at {stack.address} "
                "was started by this command. Start `agentsteps dev` first, or drop --no-worker."
            )
        hint = (
            "start `agentsteps worker` against the cluster, or pass --worker"
            if stack.cluster
            else "start `agentsteps dev` in another terminal, or drop --no-worker"
        )
        return WorkerPlan(
            False, f"no worker polls task queue {task_queue!r} on {stack.address} yet; the work waits for one ({hint})"
        )
    differing = [p for p in pollers if p.fingerprint != config_fingerprint]
    if differing:
        raise StackConflictError(
            f"another worker already polls task queue {task_queue!r} on {stack.address} with other tools or "
            f"model settings ({differing[0].identity}; last seen {differing[0].seconds_ago:.0f} s ago). Two workers "
            "on one queue must agree, or a run's outcome depends on which one takes it: use that worker "
            "(drop --worker), stop it, or give this one its own queue (AGENTSTEPS_TASK_QUEUE)."
        )
    return WorkerPlan(True, f"a worker in this process polls task queue {task_queue!r}")


def say(note: str) -> None:
    print(note, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Local:
    """What a CLI command works with: its client, the stack it found or started, and its own worker's tools."""

    client: Client
    stack: Stack
    registry: ToolRegistry | None
    """The tools of this process's worker; None when another worker serves the queue."""
    task_queue: str


@asynccontextmanager
async def client_and_worker(
    settings: WorkerSettings,
    mode: WorkerMode,
    role: str,
    *,
    task_queue: str | Callable[[Client, Stack], Awaitable[str]] | None = None,
) -> AsyncIterator[Local]:
    """Find or start the stack, connect, and run a worker here only when the rule says so (module docstring).

    ``task_queue`` may be found once connected (a session's own queue): pass a function of the client and stack.
    """
    from ..worker import QueueCheck, connect, load_registry, production_settings, running_worker
    from .offline import offline_script_text, wants_offline, worker_models

    async with AsyncExitStack() as exits:
        stack = await exits.enter_async_context(embedded_temporal(settings))
        if not stack.started_here:
            say(stack.describe())
        client = await connect(settings, stack.address)
        queue = (await task_queue(client, stack) if callable(task_queue) else task_queue) or settings.task_queue
        worker_settings = settings
        if stack.cluster and mode == "yes":
            worker_settings = production_settings(settings)
        offline = not stack.cluster and wants_offline(worker_settings)
        digest = hashlib.sha256(offline_script_text().encode()).hexdigest()[:12] if offline else None
        registry = load_registry(worker_settings)
        config = fingerprint(worker_settings, registry, digest)
        plan = await plan_worker(client, stack, queue, mode, config)
        say(plan.note)
        if not plan.start:
            yield Local(client, stack, None, queue)
            return
        models = exits.enter_context(worker_models(worker_settings)) if offline else None
        if models is not None:
            say(models.note)
            worker_settings = models.settings
        await exits.enter_async_context(
            running_worker(
                client,
                worker_settings,
                registry=registry,
                task_queue=queue,
                identity=worker_identity(role, config),
                queue_check=QueueCheck(offline_script=digest),
            )
        )
        yield Local(client, stack, registry, queue)


__all__ = [
    "Local",
    "Poller",
    "WorkerMode",
    "WorkerPlan",
    "client_and_worker",
    "fingerprint",
    "live_pollers",
    "plan_worker",
    "say",
    "worker_identity",
]
