"""Chat messages, the H in a step (H, S) -> (H', S').

Messages are immutable values (frozen, nested sequences are tuples): a
message in a history is never edited in place, so a stored conversation
prefix and the loop's list cannot silently disagree (``ConversationChain``
compares prefixes by value). A changed message is a new one
(``model_copy(update=...)``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class LLMToolCall(BaseModel):
    """A tool call as the model emitted it.

    ``arguments`` stays the raw string the provider returned: whether it parses
    is a postcondition, so it must not be lost by parsing it early.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    """Unique within the run (see ``call_ids``): what tool results answer."""
    name: str
    arguments: str = "{}"
    provider_id: str | None = None
    """The id the provider sent, when the engine had to give the call another one; sent back on the wire."""


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str | None = None
    tool_calls: tuple[LLMToolCall, ...] = Field(default_factory=tuple)
    """Only on assistant messages."""
    tool_call_id: str | None = None
    """Only on tool messages: the id of the call this message answers."""
    name: str | None = None
    """On tool messages, the tool's name (Anthropic and some OpenAI-compatible servers want it)."""
    is_error: bool = False
    """On tool messages: the tool failed and ``content`` is its error."""

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=text)
