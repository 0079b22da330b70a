"""The scripted model server: a documented test double for LLM providers.

See ``docs/scripted-model.md`` for the script file format.
"""

from .script import Fault, Match, Reply, Rule, Script, ScriptToolCall, UsageOverride
from .server import RecordedRequest, ScriptedModelServer

__all__ = [
    "Fault",
    "Match",
    "RecordedRequest",
    "Reply",
    "Rule",
    "Script",
    "ScriptToolCall",
    "ScriptedModelServer",
    "UsageOverride",
]
