"""What a backend (and the CLI) uses to drive agentsteps from outside the worker.

Names are resolved on first use, so ``import agentsteps.client`` does not pull
in Temporal's client or the workflows until a run is actually started.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runs import follow, start_agent_run, validate_spec
    from .settings import load_settings
    from .spec_files import load_spec, parse_spec

_EXPORTS = {
    "follow": ".runs",
    "start_agent_run": ".runs",
    "validate_spec": ".runs",
    "load_settings": ".settings",
    "load_spec": ".spec_files",
    "parse_spec": ".spec_files",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
