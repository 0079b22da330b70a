"""SIGTERM and SIGINT from the first line of a long-running command, not from the banner on.

Kubernetes sends SIGTERM whenever it likes, including while the worker is
still connecting. Python's default for SIGTERM kills the process on the spot,
so the handler is installed before anything slow (settings, imports of the
SDKs, connecting, building the worker): a stop asked for at any point after
that is remembered and honoured as a drain, never a kill.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_asked = threading.Event()


def _remember(signum: int, frame: FrameType | None) -> None:
    _asked.set()


def install_early() -> None:
    """Remember a stop from now on (main thread, before any slow start-up work)."""
    for sig in _SIGNALS:
        signal.signal(sig, _remember)


def stop_event() -> asyncio.Event:
    """An event set on SIGINT or SIGTERM, already set if one came before the loop was running."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    if _asked.is_set():
        stop.set()
    return stop
