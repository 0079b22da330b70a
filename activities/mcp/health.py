"""One MCP server's health as this worker sees it: state, circuit breaker, call slots, metrics.

States (``/readyz``, ``agentsteps tools list``, ``agentsteps_mcp_server_up``):

- ``up``: the last connect, listing or call reached the server.
- ``down``: the last attempt failed (or none succeeded yet), fewer than
  ``breaker.failures`` times in a row.
- ``circuit_open``: that many failures in a row. Calls fail at once (retryable)
  for the open period; then up to ``half_open_probes`` calls go through as
  probes. A probe's success closes the circuit; its failure reopens it for
  twice as long, up to ``max_open_seconds``, so a dead stdio server is
  restarted with backoff instead of on every call. Failing calls are cleared
  only by a call that works: a server whose calls hang may still answer
  ``tools/list``, so the background watcher leaves such a server to the
  runs' own (half-open) calls.
- ``misconfigured``: found at worker start (missing command, bad URL,
  unresolved secret) or when starting the server; never retried.

Only infrastructure failures (unreachable, lost, timed out) count toward the
breaker: a credential refused or a malformed answer is a reachable server
saying no, and retrying it faster or slower changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, Literal

from ...contracts.config.mcp_config import McpServerConfig
from ...contracts.mcp import McpConfigError, McpError, McpUnavailableError
from ...telemetry.metrics import MCP_CALL_OUTCOMES, MCP_CALL_SECONDS, MCP_CALLS, MCP_RECONNECTS, MCP_SERVER_UP

State = Literal["up", "down", "misconfigured", "circuit_open"]


class ServerHealth:
    def __init__(self, server: str, config: McpServerConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.server = server
        self.config = config
        self._clock = clock
        self.state: State = "down"
        self.last_error: str | None = "not connected yet"
        self.since = datetime.now(UTC)
        self._down_since: float | None = clock()
        self._last_failure = self._down_since
        self._failures = 0
        self._open_until = 0.0
        self._open_period = config.breaker.open_seconds
        self._probes = 0
        self._failing = ""
        """``call`` or ``list``: what failed last. Failing calls are cleared only by a call that works."""
        self._slots = asyncio.Semaphore(config.max_concurrent_calls)
        self._connected_once = False
        # Every series exists from the start, so "down since the worker started" shows as 0s, not as no data.
        MCP_SERVER_UP.labels(server=server).set(0)
        for outcome in MCP_CALL_OUTCOMES:
            MCP_CALLS.labels(server=server, outcome=outcome)
        MCP_CALL_SECONDS.labels(server=server)
        MCP_RECONNECTS.labels(server=server)

    # ------------------------------------------------------------ state

    def _set(self, state: State, error: str | None) -> None:
        if state == "up":
            self._down_since = None
        else:
            self._failure_seen()  # before the state changes: the gap it judges was spent in the old one
        if state != self.state:
            self.state = state
            self.since = datetime.now(UTC)
        self.last_error = error
        MCP_SERVER_UP.labels(server=self.server).set(1 if state == "up" else 0)

    def _failure_seen(self) -> None:
        """Extend the down streak, or start one if nothing was seen for longer than a streak may go unobserved.

        Between two failures seen further apart than ``give_up_seconds`` (or the open circuit's period,
        whose probes are the only looks at the server), the server may well have been up unobserved: a
        bounce of seconds an hour after the last one is not an hour of outage.
        """
        now = self._clock()
        unobserved = self.config.give_up_seconds
        if self.state == "circuit_open":
            unobserved = max(unobserved, self._open_period)
        if self._down_since is None or now - self._last_failure > unobserved:
            self._down_since = now
        self._last_failure = now

    def misconfigured(self, problem: str) -> None:
        self._set("misconfigured", problem)

    def down_for(self) -> float | None:
        """Seconds of the current down streak (since worker start if never up); None while up."""
        return None if self._down_since is None else self._clock() - self._down_since

    def probe_due(self) -> bool:
        """Whether the background watcher should try the server now (never while the circuit is open)."""
        if self.state == "misconfigured":
            return False
        if self._failing == "call" and self.state != "up":
            return False  # a listing would answer while calls hang: only a run's call can tell
        return self.state != "circuit_open" or self._clock() >= self._open_until

    def connected(self) -> None:
        if self._connected_once:
            MCP_RECONNECTS.labels(server=self.server).inc()
        self._connected_once = True

    # ------------------------------------------------------------ breaker

    def admit(self) -> bool:
        """Let one request through, or raise at once. Returns whether it is a half-open probe."""
        if self.state == "misconfigured":
            raise McpConfigError(f"misconfigured: {self.last_error}", server=self.server)
        if self.state != "circuit_open":
            return False
        wait = self._open_until - self._clock()
        if wait > 0 or self._probes >= self.config.breaker.half_open_probes:
            when = f"next probe in {wait:.1f} s" if wait > 0 else "a probe is in flight"
            raise McpUnavailableError(
                f"circuit open ({when}); last error: {self.last_error}", server=self.server, outcome="circuit_open"
            )
        self._probes += 1
        return True

    def succeeded(self, probe: bool, during: str = "call") -> None:
        if probe:
            self._probes -= 1
        if self._failing == "call" and during != "call" and self.state != "up":
            return
        self._failing = ""
        self._failures = 0
        self._open_period = self.config.breaker.open_seconds
        self._set("up", None)

    def failed(self, error: McpError, probe: bool, during: str = "call") -> None:
        if probe:
            self._probes -= 1
        message = str(error).removeprefix(f"mcp server {self.server!r}: ")
        if isinstance(error, McpConfigError):
            self._set("misconfigured", message)
            return
        if not isinstance(error, McpUnavailableError):
            self._set("down", message)
            return
        breaker = self.config.breaker
        self._failures += 1
        self._failing = during
        if probe:
            self._open_period = min(self._open_period * 2, breaker.max_open_seconds)
        if probe or self._failures >= breaker.failures:
            self._open_until = self._clock() + self._open_period
            self._set("circuit_open", message)
        else:
            self._set("down", message)

    # ------------------------------------------------------------ calls

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """One of ``max_concurrent_calls``; waits at most ``call_seconds`` for it (then ``timeout``)."""
        timeout = self.config.timeouts.call_seconds
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout=timeout)
        except TimeoutError:
            raise McpUnavailableError(
                f"{self.config.max_concurrent_calls} calls already in flight for {timeout:g} s (max_concurrent_calls)",
                server=self.server,
                outcome="timeout",
            ) from None
        try:
            yield
        finally:
            self._slots.release()

    def record(self, outcome: str, seconds: float | None = None) -> None:
        MCP_CALLS.labels(server=self.server, outcome=outcome).inc()
        if seconds is not None:
            MCP_CALL_SECONDS.labels(server=self.server).observe(seconds)

    def report(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "last_error": self.last_error,
            "since": self.since.isoformat(),
            "required": self.config.required,
        }
