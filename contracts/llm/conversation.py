"""A conversation stored outside history: a hash chain of message segments.

Each segment (node) is one JSON blob in the payload store holding the
messages it adds and the address of the segment before it, so the head's
digest vouches for the whole conversation (a Merkle chain). An ``llm.call``
given a ``ConversationRef`` loads and verifies the chain itself; the workflow
sends only the messages added since, so what each call adds to history does
not grow with the conversation.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field

from .messages import Message

NODE_VERSION = 1


class ConversationRef(BaseModel):
    """The head of a stored conversation."""

    sha256: str
    """Digest of the head segment's bytes."""
    length: int = Field(ge=0)
    """Messages in the whole conversation up to and including the head."""
    claim: dict[str, str] = Field(default_factory=dict)
    """The payload store's claim for the head segment."""


def encode_node(prev: ConversationRef | None, messages: list[Message]) -> bytes:
    """One segment's bytes: deterministic, so the same segment always has the same address."""
    body: dict[str, Any] = {
        "v": NODE_VERSION,
        "prev": prev.model_dump(mode="json") if prev is not None else None,
        "length": (prev.length if prev is not None else 0) + len(messages),
        "messages": [m.model_dump(mode="json", exclude_defaults=True) for m in messages],
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def decode_node(ref: ConversationRef, data: bytes) -> tuple[ConversationRef | None, list[Message]]:
    """The segment's predecessor and messages; ``ValueError`` when the bytes are not what ``ref`` names."""
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ValueError(f"conversation segment {ref.sha256[:12]} does not match its digest")
    body = json.loads(data)
    if not isinstance(body, dict) or body.get("v") != NODE_VERSION or body.get("length") != ref.length:
        raise ValueError(f"conversation segment {ref.sha256[:12]} is malformed or has the wrong length")
    prev = ConversationRef.model_validate(body["prev"]) if body["prev"] is not None else None
    messages = [Message.model_validate(m) for m in body["messages"]]
    if (prev.length if prev is not None else 0) + len(messages) != ref.length:
        raise ValueError(f"conversation segment {ref.sha256[:12]} does not add up to its length")
    return prev, messages


__all__ = ["ConversationRef", "decode_node", "encode_node"]
