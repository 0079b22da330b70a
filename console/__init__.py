"""The web console: approvals inbox, runs and sessions, a run's timeline, a session's live stream.

A client like the CLI (it never polls a task queue): it reads through
Temporal's visibility and the workflows' queries, and changes things only
through their updates, by the names in ``contracts/names.py``. docs/console.md.
"""

from .app import build_app
from .security import ConsoleConfigError, check_binding
from .server import running_console

__all__ = ["ConsoleConfigError", "build_app", "check_binding", "running_console"]
