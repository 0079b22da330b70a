"""SIGTERM and SIGINT from the first line of a long-running command, not from the banner on.

Kubernetes sends SIGTERM whenever it likes, including while the worker is
still connecting. Python's default for SIGTERM kills the process on the spot,
so the handler is installed before anything slow (settings, imports of the
SDKs, connecting, building the worker): a stop asked for at any point after
that is remembered and honoured as a drain, never a kill.

The first signal starts the drain and arms the stop deadline; a second one
ends the process at once (``hard_stop``). The handler is a plain
``signal.signal`` one, never the loop's ``add_signal_handler``: it runs in the
main thread between bytecodes (an idle loop's ``epoll_wait`` is interrupted
for it), so a second Ctrl-C works even when the loop is wedged.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from types import FrameType

from . import hard_stop

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_first: tuple[str, float] | None = None  # the first signal's name and time.monotonic()
_listeners: list[Callable[[], None]] = []


def _on_signal(signum: int, frame: FrameType | None) -> None:
    global _first
    name = signal.Signals(signum).name
    if _first is not None:
        hard_stop.second_signal(name, signum)
    _first = (name, time.monotonic())
    hard_stop.signalled(*_first)
    for listener in _listeners:
        listener()


def install_early() -> None:
    """Remember a stop from now on (main thread, before any slow start-up work)."""
    for sig in _SIGNALS:
        signal.signal(sig, _on_signal)


def stop_event(grace_seconds: float, margin_seconds: float = hard_stop.STOP_MARGIN_SECONDS) -> asyncio.Event:
    """An event set on SIGINT or SIGTERM, already set if one came before the loop was running.

    From that signal on the process ends within ``grace_seconds`` plus
    ``margin_seconds``, whatever the loop is doing.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    hard_stop.start_watchdog(grace_seconds, margin_seconds)

    def stopped() -> None:
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # the loop has closed: the command is leaving anyway
            pass

    install_early()  # idempotent: a caller that skipped it still drains
    _listeners.append(stopped)  # before the check: a signal between the two is seen by one or both (both is harmless)
    if _first is not None:
        stopped()
    return stop
