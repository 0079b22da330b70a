"""The MCP SDK, imported by the first connection instead of by every process that imports the worker.

``mcp`` and ``mcp_types`` cost a process about 0.6 s of CPU to import, and most workers name no MCP
server (every CLI command that connects to Temporal imports ``worker.py`` too). The pool awaits
``load()`` before it connects, so the import runs in a thread, not on the event loop every activity
and poller shares. Every other use of the SDK (a call's request and result, a content block, an
error to translate) comes after a connection, so the modules here import it where they use it.
``tests/activities/test_lazy_sdk_imports.py`` proves both.
"""

from __future__ import annotations

import asyncio
import importlib

_MODULES = ("mcp_types", "mcp", "mcp.client.stdio", "mcp.client.streamable_http", "mcp.shared.exceptions")
_loaded = False


def _import() -> None:
    global _loaded
    for module in _MODULES:
        importlib.import_module(module)
    _loaded = True


async def load() -> None:
    """Import the SDK (once, in a thread); concurrent callers wait on Python's import lock, not the loop."""
    if not _loaded:
        await asyncio.to_thread(_import)
