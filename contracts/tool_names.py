"""Tool names as the provider APIs and code mode's stubs spell them.

Both APIs take only ``^[a-zA-Z0-9_-]{1,64}$``; the engine's names may carry a
``.`` (``tickets.search``, MCP prefixes). On the wire each name is sent as
``api_tool_name(name)`` and an answer's names are mapped back through the
request's own table. That table is exact only if no two tools of a run share
an API name, or a Python stub identifier (``get-sum`` and ``get_sum`` are both
``get_sum()`` in code mode), so such a pair is a config error at start rather
than one tool silently hiding the other.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable

from .code.stubs import python_name

API_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def api_tool_name(name: str) -> str:
    """The name both APIs accept; a safe name is left as it is."""
    if API_TOOL_NAME.match(name):
        return name
    safe = _UNSAFE.sub("_", name) or "_"
    if len(safe) > 64:
        # Only a name no tool has (a model's invention echoed in a re-prompt) gets here: keep it distinct.
        safe = f"{safe[:55]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return safe


def tool_name_collisions(names: Iterable[str]) -> list[str]:
    """One message per group of distinct tool names that would be one name on the wire or in code mode."""
    unique = list(dict.fromkeys(names))
    problems = []
    for label, spell in (("API tool name", api_tool_name), ("code-mode function name", python_name)):
        groups: dict[str, list[str]] = defaultdict(list)
        for name in unique:
            groups[spell(name)].append(name)
        problems += [
            f"tools {', '.join(repr(n) for n in group)} all become the {label} {spelt!r}; rename one of them"
            for spelt, group in groups.items()
            if len(group) > 1
        ]
    return problems


__all__ = ["API_TOOL_NAME", "api_tool_name", "tool_name_collisions"]
