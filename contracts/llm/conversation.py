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

NODE_VERSION = 2
"""2: the segment names its owner (the run or session it was written for). 1: older, unbound."""
_VERSIONS = (1, 2)


class ForeignSegmentError(ValueError):
    """A segment bound to another run or session than the one loading it."""


class ConversationRef(BaseModel):
    """The head of a stored conversation."""

    sha256: str
    """Digest of the head segment's bytes."""
    length: int = Field(ge=0)
    """Messages in the whole conversation up to and including the head."""
    claim: dict[str, str] = Field(default_factory=dict)
    """The payload store's claim for the head segment."""


def encode_node(prev: ConversationRef | None, messages: list[Message], owner: str = "") -> bytes:
    """One segment's bytes: deterministic, so the same segment always has the same address.

    With ``owner`` (every current caller) the segment is bound to it: the same
    messages stored by two sessions are two segments, and neither loads in the other.
    """
    body: dict[str, Any] = {
        "v": NODE_VERSION if owner else 1,
        "prev": prev.model_dump(mode="json") if prev is not None else None,
        "length": (prev.length if prev is not None else 0) + len(messages),
        "messages": [m.model_dump(mode="json", exclude_defaults=True) for m in messages],
    }
    if owner:
        body["owner"] = owner
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def decode_node(
    ref: ConversationRef, data: bytes, owner: str | None = ""
) -> tuple[ConversationRef | None, list[Message]]:
    """The segment's predecessor and messages; ``ValueError`` when the bytes are not what ``ref`` names,
    ``ForeignSegmentError`` when the segment is bound to another owner than ``owner``.

    Segments written before owners existed (version 1) name none and load
    anywhere; only a run's own carried state can name one (``carried_problem``).
    ``owner=None`` reads without the check: for walking chains (payload
    retention), never for loading a conversation into a run.
    """
    if hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ValueError(f"conversation segment {ref.sha256[:12]} does not match its digest")
    body = json.loads(data)
    if not isinstance(body, dict) or body.get("v") not in _VERSIONS or body.get("length") != ref.length:
        raise ValueError(f"conversation segment {ref.sha256[:12]} is malformed or has the wrong length")
    if owner is not None and body["v"] >= 2 and body.get("owner") != owner:
        raise ForeignSegmentError(f"conversation segment {ref.sha256[:12]} belongs to another run or session")
    prev = ConversationRef.model_validate(body["prev"]) if body["prev"] is not None else None
    messages = [Message.model_validate(m) for m in body["messages"]]
    if (prev.length if prev is not None else 0) + len(messages) != ref.length:
        raise ValueError(f"conversation segment {ref.sha256[:12]} does not add up to its length")
    return prev, messages


__all__ = ["ConversationRef", "ForeignSegmentError", "decode_node", "encode_node"]
