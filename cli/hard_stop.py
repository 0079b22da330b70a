"""Ending a stopping worker the hard way: the stop deadline and a second stop signal.

A stop drains (``stop_signal``, ``dev._serve``): no new tasks, running
activities get ``graceful_shutdown_seconds``, then the SDK cancels them and
its ``Worker.shutdown()`` waits until every one has finished or accepted its
cancellation. That wait has no end of its own: a tool that swallows
``asyncio.CancelledError``, or sdk-core stuck in an invalid state (seen in the
soak), keeps the process alive forever under systemd, ``docker stop`` with a
long grace, or in a terminal. So a stop always ends the process:

- ``graceful_shutdown_seconds + stop_margin_seconds`` after the first signal
  a daemon thread (it needs nothing from the asyncio loop, which may be the
  thing that is stuck) prints one ``error:`` line and exits
  ``EXIT_STOP_TIMED_OUT``;
- a second SIGINT or SIGTERM exits at once, ``128 + signum`` (130 for Ctrl-C,
  as the shell reports a process ended by that signal).

Either way the running activities are abandoned, which loses nothing:
Temporal retries each after its timeout with the same idempotency key, and a
run's effect ledger answers a recorded side effect without repeating it.

The margin (the ``stop_margin_seconds`` setting, ``STOP_MARGIN_SECONDS`` = 20 by default) covers
what the SDK and the worker do after the grace: cancellations reach the activities at their next ``await``, each
reports to the server (one RPC), the last workflow task completions flush,
then MCP sessions close (a stdio server gets 2 s to leave after its stdin
closes, 2 more after SIGTERM) and the sandbox pool stops. A healthy worker
with one cancelled tool did all of it in 0.3-0.4 s
(``tests/e2e/test_stop_deadline.py`` prints the figure). It also keeps the deadline inside the grace periods we ship, so
the line reaches the log before anything SIGKILLs the process: 150 + 20 s
against the Deployment's ``terminationGracePeriodSeconds`` 180, the soak's 15 +
20 against its 60.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import NoReturn

EXIT_STOP_TIMED_OUT = 4
STOP_MARGIN_SECONDS = 20.0
"""The default of the ``stop_margin_seconds`` setting (spelled here too: this module is imported before
the settings are, to catch a stop while the command starts; a test holds the two equal)."""

ABANDONED = (
    "running activities are abandoned: Temporal retries each after its timeout with the same "
    "idempotency key, and the run's effect ledger keeps a recorded side effect from repeating"
)

_waiting_for = "the command to stop (it was still starting: settings, connecting or building the worker)"
_signalled = threading.Event()
_first: tuple[str, float] | None = None  # the first stop signal's name and time.monotonic()
_watchdog: threading.Thread | None = None


def waiting_for(what: str) -> None:
    """Name what the stop is waiting for now, for the line printed if the deadline passes."""
    global _waiting_for
    _waiting_for = what


def start_watchdog(grace_seconds: float, margin_seconds: float = STOP_MARGIN_SECONDS) -> None:
    """Start (once, before any signal can need it) the daemon thread that ends the process
    ``grace_seconds + margin_seconds`` after the first stop signal.

    Started ahead, not from the signal handler: a handler that started a thread could
    deadlock on a threading lock the interrupted main thread holds.
    """
    global _watchdog
    if _watchdog is not None:
        return
    _watchdog = threading.Thread(
        target=_watch, args=(grace_seconds, margin_seconds), name="agentsteps-stop-deadline", daemon=True
    )
    _watchdog.start()


def signalled(signal_name: str, at: float) -> None:
    """The first stop signal came (called from its handler: sets an event, nothing more)."""
    global _first
    _first = (signal_name, at)
    _signalled.set()


def _watch(grace_seconds: float, margin_seconds: float) -> None:
    _signalled.wait()
    assert _first is not None
    signal_name, at = _first
    limit = grace_seconds + margin_seconds
    time.sleep(max(0.0, at + limit - time.monotonic()))
    # Still here: the normal stop ends the process (cli.main._exit) long before this.
    exit_now(
        EXIT_STOP_TIMED_OUT,
        f"error: still stopping {time.monotonic() - at:.0f} s after {signal_name} (graceful_shutdown_seconds "
        f"{grace_seconds:g} + {margin_seconds:g} s margin), waiting for {_waiting_for}; exiting "
        f"with status {EXIT_STOP_TIMED_OUT}: {ABANDONED}",
    )


def second_signal(signal_name: str, signum: int) -> NoReturn:
    exit_now(
        128 + signum,
        f"error: {signal_name} again while stopping: exiting now (status {128 + signum}) without waiting "
        f"for {_waiting_for}; {ABANDONED}",
    )


def exit_now(status: int, line: str) -> NoReturn:
    """Flush what was printed, write ``line`` to stderr and end the process with ``status``.

    Called from a timer thread or a signal handler, maybe while the main thread is
    inside a write: a flush that fails (a reentrant call) must not stop the exit,
    and the line goes straight to the file descriptor.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - exiting regardless is the point
            pass
    try:
        os.write(2, f"{line}\n".encode("utf-8", "replace"))
    except OSError:
        pass
    os._exit(status)
