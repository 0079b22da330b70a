"""The scripted model server: a documented test double for LLM providers.

See ``docs/scripted-model.md`` for the script file format.
"""

from importlib import resources
from pathlib import Path

from .cli import run_cli
from .script import Fault, Match, Quota, Reply, Rule, Script, ScriptToolCall, StreamShape, UsageOverride
from .server import RecordedRequest, ScriptedModelServer

__all__ = [
    "bundled_script",
    "Fault",
    "Match",
    "Quota",
    "RecordedRequest",
    "Reply",
    "Rule",
    "Script",
    "ScriptToolCall",
    "ScriptedModelServer",
    "StreamShape",
    "UsageOverride",
    "run_cli",
]


def bundled_script(name: str) -> Path:
    """Path of a script shipped in ``scripted_model/scripts/``, e.g. ``bundled_script("weather.json")``."""
    path = Path(str(resources.files(__name__) / "scripts" / name))
    if not path.is_file():
        raise FileNotFoundError(f"no bundled scripted-model script named {name!r}")
    return path
