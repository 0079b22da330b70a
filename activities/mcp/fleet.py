"""The worker's MCP servers as a fleet: one down server never touches runs that do not use it.

- **One server per name, the same for describe and call.** ``resolve(names)``
  asks every server whose config lets it offer a name (its ``tools = [...]``
  list names it, or it has no list and the name starts with its
  ``tool_prefix``) and no other. Two servers offering one name is
  ``McpConfigError``; a server that may offer a name and is down fails that
  name (bounded), even if another offers it, so no call is routed by who
  happened to be up. Give each server a distinct ``tool_prefix`` or a
  ``tools`` list and a down server touches only the runs that use it.
- **A catalog that stays fresh.** Each server's catalog is cached for its
  ``catalog_ttl_seconds`` and dropped on ``notifications/tools/list_changed``;
  a background watcher refreshes it and probes servers that are down.
- **Bounded failure.** While a run's server is down, its activity fails
  retryable; once the server has been down (or the activity has been
  retrying) for the server's ``give_up_seconds``, it fails with
  ``McpServerDownError`` (not retried), naming the server.
- **Health.** ``health`` (per server, ``health.py``) drives ``/readyz``,
  ``agentsteps tools list`` and the ``agentsteps_mcp_*`` metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio import activity

from ...contracts.llm.tools import OUTCOME_UNKNOWN, TOOL_REMOVED, ToolCallInput, ToolCallResult, ToolSchema
from ...contracts.mcp import McpConfigError, McpError, McpServerDownError, McpUnavailableError
from ..attempts import recalled, remember
from .client import McpToolClient
from .health import ServerHealth
from .preflight import config_problem

log = logging.getLogger(__name__)

WATCH_INTERVAL_SECONDS = 1.0
"""How often the watcher looks for stale catalogs and servers due a probe (it contacts them far less often)."""


@dataclass
class _Catalog:
    tools: dict[str, ToolSchema]
    fetched: float
    stale: bool = False


class McpFleet:
    def __init__(self, client: McpToolClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.config = client.pool.config
        self._secrets = client.pool.secrets
        self._clock = clock
        self.health = {name: ServerHealth(name, cfg, clock) for name, cfg in sorted(self.config.servers.items())}
        self._catalogs: dict[str, _Catalog] = {}
        self._owner: dict[str, str] = {}
        """Tool name -> the server that last offered it; kept after removal, so a call reaches it and is told."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._probes: dict[str, asyncio.Task[Any]] = {}
        self._watcher: asyncio.Task[None] | None = None
        client.pool.on_connect = lambda server: self.health[server].connected()
        client.pool.on_list_changed = self._list_changed
        self.preflight()

    # ------------------------------------------------------------ lifecycle

    def preflight(self) -> None:
        for name, health in self.health.items():
            problem = config_problem(self.config.servers[name], self._secrets)
            if problem is not None:
                health.misconfigured(problem)
                log.error(
                    "mcp server %r is misconfigured: %s (runs using its tools fail; others are untouched)",
                    name,
                    problem,
                )

    def start(self) -> None:
        """Connect to every server in the background, then keep catalogs fresh and probe the down ones."""
        if self._watcher is None and self.health:
            self._watcher = asyncio.create_task(self._watch(), name="mcp-fleet-watcher")

    async def aclose(self) -> None:
        tasks = [t for t in [self._watcher, *self._probes.values()] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        await self.client.aclose()

    async def _watch(self) -> None:
        while True:
            for name, health in self.health.items():
                if name in self._probes and not self._probes[name].done():
                    continue
                if (health.state != "up" and health.probe_due()) or (health.state == "up" and not self._fresh(name)):
                    self._probes[name] = asyncio.create_task(self._probe(name), name=f"mcp-probe-{name}")
            await asyncio.sleep(WATCH_INTERVAL_SECONDS)

    async def _probe(self, server: str) -> None:
        with contextlib.suppress(McpError):
            await self.catalog(server, force=True)

    # ------------------------------------------------------------ catalogs

    def _fresh(self, server: str) -> bool:
        catalog = self._catalogs.get(server)
        ttl = self.config.servers[server].catalog_ttl_seconds
        return catalog is not None and not catalog.stale and self._clock() - catalog.fetched < ttl

    def _list_changed(self, server: str) -> None:
        catalog = self._catalogs.get(server)
        if catalog is not None:
            catalog.stale = True
        log.info("mcp server %r: tool list changed; the catalog is fetched again", server)

    async def catalog(self, server: str, *, force: bool = False) -> dict[str, ToolSchema]:
        """``server``'s tools, from cache while fresh; a fetch goes through the breaker and updates health."""
        lock = self._locks.setdefault(server, asyncio.Lock())
        async with lock:
            if self._fresh(server) and not force:
                return self._catalogs[server].tools
            health = self.health[server]
            probe = health.admit()
            try:
                schemas = await self.client.list_tools(server)
            except McpError as error:
                health.failed(error, probe, during="list")
                raise
            health.succeeded(probe, during="list")
            declared = self.config.servers[server].tools
            prefix = self.config.servers[server].tool_prefix
            tools = {s.name: s for s in schemas if declared is None or s.name[len(prefix) :] in declared}
            self._catalogs[server] = _Catalog(tools, self._clock())
            for name in tools:
                self._owner[name] = server
            return tools

    def serves(self, server: str, name: str) -> bool:
        """Whether ``server``'s config lets it offer ``name``: its ``tools`` list names it, or it has no
        list and ``name`` starts with its ``tool_prefix``. Config only, the same on every worker."""
        config = self.config.servers[server]
        if not name.startswith(config.tool_prefix):
            return False
        return config.tools is None or name[len(config.tool_prefix) :] in config.tools

    def known_owner(self, name: str) -> str | None:
        """The one server whose cached catalog offers ``name`` (None if none or several), contacting none."""
        owners = [s for s in self.health if self.serves(s, name) and name in self._cached(s)]
        return owners[0] if len(owners) == 1 else None

    def _cached(self, server: str) -> dict[str, ToolSchema]:
        catalog = self._catalogs.get(server)
        return catalog.tools if catalog is not None else {}

    async def resolve(self, names: Sequence[str], *, strict: bool = True) -> dict[str, tuple[str, ToolSchema]]:
        """Each name a server offers -> that server and its schema; the one rule ``describe`` and
        ``call`` share, so a run is described by the server its calls go to.

        Every server whose config lets it offer a name is asked (its catalog, cached while fresh), not
        only the first that answers: which server a name reaches never depends on which catalogs a
        worker happens to hold. Two servers offering one name is ``McpConfigError`` (both named). With
        ``strict``, a server that may offer a name and cannot be asked raises its (bounded) error,
        even if another offers it: the name might be ambiguous, and a call must not reach a server
        chosen by who was up. Without ``strict`` (the Python-tool clash check) it is skipped.
        """
        offers: dict[str, list[tuple[str, ToolSchema]]] = {n: [] for n in names}
        failures: list[McpError] = []
        for server in self.health:
            wanted = [n for n in offers if self.serves(server, n)]
            if not wanted:
                continue
            try:
                tools = await self.catalog(server)
            except McpError as error:
                failures.append(error)
                continue
            for name in wanted:
                if name in tools:
                    offers[name].append((server, tools[name]))
        clashes = [
            f"tool {name!r} is offered by servers {' and '.join(repr(s) for s, _ in found)}"
            for name, found in offers.items()
            if len(found) > 1
        ]
        if clashes:
            raise McpConfigError("; ".join(clashes) + "; give each a distinct tool_prefix or a tools list")
        if strict and failures:
            raise self.bounded(failures[0])
        return {name: found[0] for name, found in offers.items() if found}

    async def describe(self, names: Sequence[str] | None = None) -> list[ToolSchema]:
        """Schemas for ``names`` (every reachable tool when None), asking only the servers that may serve them.

        A server that may serve a name and cannot be reached raises its error
        (bounded, see ``bounded``); two servers offering a name raise ``McpConfigError``.
        """
        if names is None:
            return await self._describe_all()
        resolved = await self.resolve(list(dict.fromkeys(names)))
        return [resolved[n][1] for n in names if n in resolved]

    async def _describe_all(self) -> list[ToolSchema]:
        schemas: list[ToolSchema] = []
        owner: dict[str, str] = {}
        for server in self.health:
            try:
                tools = await self.catalog(server)
            except McpError:
                continue  # the server's state says why; the rest are still listed
            for name, schema in tools.items():
                if name in owner:
                    raise McpConfigError(
                        f"tool {name!r} is offered by servers {owner[name]!r} and {server!r}; "
                        "set tool_prefix on one of them"
                    )
                owner[name] = server
                schemas.append(schema)
        return schemas

    # ------------------------------------------------------------ calls

    async def call(self, call: ToolCallInput) -> ToolCallResult | None:
        """Run ``call`` on the server of its tool; None when no server serves a tool of that name."""
        resolved = await self.resolve([call.name])
        if call.name in resolved:
            server = resolved[call.name][0]
        elif call.name in self._owner:
            server = self._owner[call.name]  # removed since: its server answers, and the model is told
        else:
            return None
        catalog = self._catalogs.get(server)
        if catalog is not None and catalog.stale:
            # The server said its list changed: learn it first, so a removed tool is told apart from a failure.
            with contextlib.suppress(McpError):
                await self.catalog(server)
        health = self.health[server]
        try:
            return await self._guarded_call(health, call)
        except McpError as error:
            raise self.bounded(error) from None

    async def _guarded_call(self, health: ServerHealth, call: ToolCallInput) -> ToolCallResult:
        try:
            probe = health.admit()  # fail fast, before waiting for a slot
            async with health.slot():
                if not probe and health.state == "circuit_open":
                    probe = health.admit()  # the circuit opened while this call waited: no pile-up
                started = self._clock()
                try:
                    result = await self.client.call_tool(health.server, call)
                except McpError as error:
                    health.failed(error, probe)
                    health.record(getattr(error, "outcome", "infra_error"), self._clock() - started)
                    error.recorded = True
                    raise
                except BaseException:
                    if probe:
                        health.failed(McpUnavailableError("probe cancelled", server=health.server), probe)
                    raise
        except McpError as error:
            if not getattr(error, "recorded", False):  # refused before reaching the server
                health.record(getattr(error, "outcome", "infra_error"))
            raise
        elapsed = self._clock() - started
        if result.error_type == OUTCOME_UNKNOWN:
            health.failed(McpUnavailableError(result.content[:300], server=health.server), probe)
            health.record("infra_error", elapsed)
            return result
        health.succeeded(probe)
        health.record("error" if result.is_error else "ok", elapsed)
        if result.error_type == TOOL_REMOVED:
            self._list_changed(health.server)
        return result

    def bounded(self, error: McpError) -> McpError:
        """``error``, or ``McpServerDownError`` once its server has been down past ``give_up_seconds``."""
        if not isinstance(error, McpUnavailableError) or error.server not in self.health:
            return error
        health = self.health[error.server]
        bound = health.config.give_up_seconds
        down = health.down_for() or 0.0
        retrying = _retrying_since_unavailable(error.server) if activity.in_activity() else 0.0
        if max(down, retrying) < bound:
            return error
        return McpServerDownError(
            f"down for {max(down, retrying):.0f} s, past give_up_seconds = {bound:g}; last error: {health.last_error}",
            server=error.server,
        )

    # ------------------------------------------------------------ health

    def report(self) -> dict[str, dict[str, Any]]:
        return {name: health.report() for name, health in self.health.items()}

    def ready(self) -> bool:
        """False while a ``required`` server is not up."""
        return all(h.state == "up" for h in self.health.values() if h.config.required)


def _retrying_since_unavailable(server: str) -> float:
    """Seconds since this activity's first attempt that found ``server`` unavailable, in a row.

    Carried from attempt to attempt (``attempts``). Not the time since the activity was scheduled:
    that counts waiting for a worker, or sitting on a killed one until its timeout, as the server
    being down, and failed a call on the first blip after it.
    """
    key = f"mcp_unavailable_since:{server}"
    now = time.time()
    recorded = recalled(key)
    since = float(recorded) if isinstance(recorded, (int, float)) and recorded <= now else now
    remember(key, since)
    return now - since
