"""Each MCP failure mode gives its documented, typed outcome (docs/mcp.md, "Failures"), on both transports.

- bad output (fails the tool's output schema): an error result carrying a ``tool_output_invalid`` violation;
- ``is_error``: an error result with the server's message;
- a server that dies mid-call: retryable ``McpUnavailableError``; the next call reconnects;
- a server that hangs: retryable ``McpUnavailableError`` ("timed out") after ``call_seconds``,
  and neither the pool nor other calls are wedged by it.

The hostile server misbehaves on purpose; the real tracker is hung with
SIGSTOP and killed mid-call with SIGKILL, which is what an outage looks like.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from mcp_support import (
    child_pids,
    free_port,
    hostile,
    http_tracker,
    http_tracker_process,
    make_client,
    new_token,
    seeded_db,
    stdio_tracker,
    tool_call,
    wait_for_port,
)

from agentsteps.contracts.mcp import McpUnavailableError

HOSTILE_HTTP = str(Path(__file__).parents[1] / "support" / "mcp_hostile_http.py")
CALL_SECONDS = 1.5
HANG_BOUND = 8.0
"""call_seconds plus the SDK's own slack plus reaping a hung stdio child (close, SIGTERM, SIGKILL)."""
TIMEOUTS = {"call_seconds": CALL_SECONDS, "connect_seconds": 10}


@contextmanager
def hostile_http_process(port: int, marker: Path) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(
        [sys.executable, HOSTILE_HTTP, str(port)],
        env={**os.environ, "HOSTILE_MARKER": str(marker)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _reap(previous: subprocess.Popen | None) -> None:
    """Wait out a server that was killed or died before starting its successor on the same port.

    Until it is reaped its listening socket may still complete handshakes, so the successor's
    port check would pass against the dead server and the next call would find nothing there.
    """
    if previous is not None:
        previous.wait(timeout=10)


class Rogue:
    """A client for the hostile server over one transport, and a way to bring a dead server back."""

    def __init__(self, transport: str, tmp_path: Path) -> None:
        self.transport = transport
        self.marker = tmp_path / "marker"
        self.port = free_port()
        self._processes = contextlib.ExitStack()
        self._proc: subprocess.Popen | None = None
        if transport == "stdio":
            server = hostile(timeouts=TIMEOUTS)
        else:
            server = {"transport": "http", "url": f"http://127.0.0.1:{self.port}/mcp", "timeouts": TIMEOUTS}
            self.start()
        self.client = make_client(
            {"rogue": server}, {"HOSTILE_TOKEN": "hostile-secret-value", "HOSTILE_MARKER": str(self.marker)}
        )

    def start(self) -> None:
        """(Re)start the HTTP server; a stdio server is restarted by the pool itself."""
        if self.transport == "http":
            _reap(self._proc)
            self._proc = self._processes.enter_context(hostile_http_process(self.port, self.marker))

    async def close(self) -> None:
        await self.client.aclose()
        self._processes.close()


@pytest.fixture(params=["stdio", "http"])
async def rogue(request, tmp_path):
    rogue = Rogue(request.param, tmp_path)
    yield rogue
    await rogue.close()


# -- the hostile server, both transports ----------------------------------------------------


async def test_output_that_fails_its_schema_is_a_violation_result_and_the_session_survives(rogue):
    bad = await rogue.client.call_tool("rogue", tool_call("bad_output"))
    assert bad.is_error and bad.structured is None
    assert "[tool_output_invalid] at $.count" in bad.content
    text_only = await rogue.client.call_tool("rogue", tool_call("text_only_with_schema"))
    assert text_only.is_error and "tool_output_invalid" in text_only.content
    good = await rogue.client.call_tool("rogue", tool_call("good_output"))
    assert not good.is_error and good.structured == {"count": 3}


async def test_an_is_error_result_reaches_the_model_as_an_error_result(rogue):
    result = await rogue.client.call_tool("rogue", tool_call("fails"))
    assert result.is_error and result.content == "boom: the widget is on fire"


async def test_a_server_dying_mid_call_is_retryable_and_the_next_call_reconnects(rogue):
    started = time.monotonic()
    with pytest.raises(McpUnavailableError) as info:
        await rogue.client.call_tool("rogue", tool_call("die"))
    # Noticed as a death, not waited out as a hang.
    assert info.value.retryable and time.monotonic() - started < CALL_SECONDS
    rogue.start()
    assert not (await rogue.client.call_tool("rogue", tool_call("good_output"))).is_error


async def test_a_hanging_call_times_out_as_retryable_and_the_pool_carries_on(rogue):
    await rogue.client.list_tools()
    started = time.monotonic()
    with pytest.raises(McpUnavailableError, match="timed out") as info:
        await rogue.client.call_tool("rogue", tool_call("hang"))
    assert info.value.retryable and CALL_SECONDS <= time.monotonic() - started < HANG_BOUND
    assert not (await rogue.client.call_tool("rogue", tool_call("good_output"))).is_error


async def test_a_hanging_call_does_not_block_a_concurrent_call_to_another_server(tmp_path):
    secrets = {"HOSTILE_TOKEN": "x" * 8, "HOSTILE_MARKER": str(tmp_path / "m")}
    client = make_client({"stuck": hostile(timeouts=TIMEOUTS), "fine": hostile(timeouts=TIMEOUTS)}, secrets)
    try:
        await client.list_tools("stuck")
        hung = asyncio.create_task(client.call_tool("stuck", tool_call("hang")))
        await asyncio.sleep(0.2)
        started = time.monotonic()
        fine = await client.call_tool("fine", tool_call("good_output"))
        assert not fine.is_error and time.monotonic() - started < CALL_SECONDS
        assert not hung.done()
        with pytest.raises(McpUnavailableError, match="timed out"):
            await hung
    finally:
        await client.aclose()
    assert child_pids("mcp_hostile_server.py") == []


async def test_over_http_a_hanging_call_leaves_concurrent_calls_on_the_same_server_alone(tmp_path):
    rogue = Rogue("http", tmp_path)
    try:
        await rogue.client.list_tools()
        hung = asyncio.create_task(rogue.client.call_tool("rogue", tool_call("hang")))
        await asyncio.sleep(0.2)
        fine = await asyncio.gather(*[rogue.client.call_tool("rogue", tool_call("good_output")) for _ in range(3)])
        assert all(r.structured == {"count": 3} for r in fine) and not hung.done()
        with pytest.raises(McpUnavailableError, match="timed out"):
            await hung
    finally:
        await rogue.close()


# -- the real tracker, hung and killed ------------------------------------------------------


@pytest.fixture(scope="module")
def token() -> str:
    return new_token()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return seeded_db(tmp_path_factory.mktemp("tickets-fail"), issues=100)


class Tracker:
    """The tracker over one transport, with the pid of the process that serves it."""

    def __init__(self, transport: str, db: Path, token: str) -> None:
        self.transport, self.db, self.token = transport, db, token
        self.port = free_port()
        self._processes = contextlib.ExitStack()
        self._proc: subprocess.Popen | None = None
        if transport == "stdio":
            server = stdio_tracker(db, timeouts=TIMEOUTS)
        else:
            server = http_tracker(self.port, timeouts=TIMEOUTS)
            self.start()
        self.client = make_client({"tickets": server}, {"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token})

    def start(self) -> None:
        """(Re)start the HTTP tracker; a stdio one is restarted by the pool itself."""
        if self.transport == "http":
            _reap(self._proc)
            self._proc = self._processes.enter_context(http_tracker_process(self.db, self.port, self.token))

    def pid(self) -> int:
        if self._proc is not None:
            return self._proc.pid
        [pid] = child_pids(f"--transport stdio --db {self.db}")
        return pid

    async def close(self) -> None:
        await self.client.aclose()
        self._processes.close()


@pytest.fixture(params=["stdio", "http"])
async def tracker(request, db, token):
    tracker = Tracker(request.param, db, token)
    yield tracker
    await tracker.close()


def _get(issue: str = "PROJ-1"):
    return tool_call("get_issue", {"id": issue})


async def test_a_hung_tracker_times_out_as_retryable_and_is_reconnected_after(tracker):
    assert not (await tracker.client.call_tool("tickets", _get())).is_error
    pid = tracker.pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(McpUnavailableError, match="timed out") as info:
            await tracker.client.call_tool("tickets", _get())
        assert info.value.retryable and CALL_SECONDS <= time.monotonic() - started < HANG_BOUND
    finally:
        with contextlib.suppress(ProcessLookupError):  # the pool already killed a hung stdio child
            os.kill(pid, signal.SIGCONT)
    result = await tracker.client.call_tool("tickets", _get("PROJ-2"))
    assert not result.is_error and result.structured["id"] == "PROJ-2"
    if tracker.transport == "stdio":
        # The hung child was killed, not left behind; a fresh one serves now.
        assert tracker.pid() != pid and not Path(f"/proc/{pid}").exists()


async def test_a_tracker_killed_mid_call_is_retryable_and_the_next_call_reconnects(tracker):
    assert not (await tracker.client.call_tool("tickets", _get())).is_error
    pid = tracker.pid()
    # Stopped first, so the kill surely lands while the call is in flight.
    os.kill(pid, signal.SIGSTOP)
    call = asyncio.create_task(tracker.client.call_tool("tickets", _get()))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(McpUnavailableError) as info:
        await call
    assert info.value.retryable and time.monotonic() - started < CALL_SECONDS
    tracker.start()
    result = await tracker.client.call_tool("tickets", _get("PROJ-3"))
    assert not result.is_error and result.structured["id"] == "PROJ-3"
