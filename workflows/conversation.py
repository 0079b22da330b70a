"""The workflow's side of a stored conversation: what to send each ``llm.call``.

A loop keeps working on a plain message list, the *tail*: the messages after
``base``, the conversation already stored. Each chained ``llm.call`` stores
the request's messages and returns their ``ConversationRef``; the chain
remembers that stored prefix, and the next call sends its ref plus only the
messages after it. So each call adds to history its new messages, never the
conversation.

The rule is by value. Messages are immutable values, and the chain remembers
each stored prefix as the tuple of its messages: a tail that begins with an
equal prefix (the longest one) is sent as that prefix's ref plus the rest, so
a loop that rebuilds equal messages resends nothing. A tail that begins with
no stored prefix (a message was changed or dropped) starts a new segment on
``base`` and sends all of itself, so a change always reaches the store.
Replay rebuilds equal lists, so it sends what the run sent.

A tool message a ``tools.call`` stored itself (``remember_message``) goes as a
placeholder naming that segment (``LLMRequest.stored_messages``), not as its
content: the content is in history once, as the ``tools.call`` result.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import LLMRequest, Message
    from ..contracts.llm.conversation import ConversationRef
    from ..contracts.session import session_owner


class ConversationChain:
    def __init__(self, base: ConversationRef | None, owner: str = "") -> None:
        self.base = base
        self.owner = owner
        """Every segment this chain stores is bound to the run (or session) it belongs to (``own_chain``)."""
        self._stored: list[tuple[tuple[Message, ...], ConversationRef]] = []
        """Stored prefixes of the tail, longest first."""
        self._messages: dict[Message, ConversationRef] = {}
        """Tool messages stored by their ``tools.call``, by value."""

    @classmethod
    def own_chain(cls, base: ConversationRef | None) -> ConversationChain:
        """A chain owned by the calling workflow: its id and the first run of its continue-as-new chain."""
        info = workflow.info()
        return cls(base, session_owner(info.workflow_id, info.first_execution_run_id))

    def _longest_stored(self, tail: Sequence[Message]) -> tuple[int, ConversationRef | None]:
        for prefix, ref in self._stored:
            # Tuple equality tries identity first, so an unchanged list costs one pointer test a message.
            if len(prefix) <= len(tail) and tuple(tail[: len(prefix)]) == prefix:
                return len(prefix), ref
        return 0, self.base

    def request(self, request: LLMRequest) -> LLMRequest:
        """``request`` with its messages replaced by a stored prefix's ref and what came after it."""
        length, ref = self._longest_stored(request.messages)
        tail = request.messages[length:]
        stored = {i: self._messages[m] for i, m in enumerate(tail) if m.role == "tool" and m in self._messages}
        if stored:
            tail = [m.model_copy(update={"content": None}) if i in stored else m for i, m in enumerate(tail)]
        return request.model_copy(
            update={
                "messages": tail,
                "conversation": ref,
                "chained": True,
                "owner": self.owner,
                "stored_messages": stored,
            }
        )

    def remember_message(self, message: Message, ref: ConversationRef) -> None:
        """``message`` is stored as the one-message segment ``ref`` (what its ``tools.call`` returned)."""
        self._messages[message] = ref

    def learn(self, tail: Sequence[Message], ref: ConversationRef) -> None:
        """``tail`` is stored as ``ref`` (what ``llm.call`` returned for it)."""
        if tail:
            self._stored.append((tuple(tail), ref))
            self._stored.sort(key=lambda known: len(known[0]), reverse=True)

    def commit(self, tail: Sequence[Message]) -> tuple[ConversationRef | None, list[Message]]:
        """The stored conversation and the messages after it that ``tail`` ends the turn with."""
        length, ref = self._longest_stored(tail)
        return ref, list(tail[length:])


__all__ = ["ConversationChain"]
