"""The workflow's side of a stored conversation (sessions): what to send each ``llm.call``.

A turn's loop keeps working on a plain message list, the *tail*: the messages
after ``base``, the conversation already stored. Each chained ``llm.call``
stores the request's messages and returns their ``ConversationRef``; the
chain remembers it, and the next call sends that ref plus only the messages
added since. So each call adds to history its new messages, never the
conversation. Lists in a loop only grow by copying (``[*history, ...]``) or
shrink to a prefix, so a prefix is recognised by the identity of its last
message object; that holds on replay as well, since replay rebuilds the same
lists.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import LLMRequest, Message
    from ..contracts.llm.conversation import ConversationRef


class ConversationChain:
    def __init__(self, base: ConversationRef | None) -> None:
        self.base = base
        self._known: list[tuple[int, Message, ConversationRef]] = []

    def _longest_known(self, tail: list[Message]) -> tuple[int, ConversationRef | None]:
        for length, last, ref in reversed(self._known):
            if length <= len(tail) and tail[length - 1] is last:
                return length, ref
        return 0, self.base

    def request(self, request: LLMRequest) -> LLMRequest:
        """``request`` with its messages replaced by a stored prefix's ref and what came after it."""
        length, ref = self._longest_known(request.messages)
        return request.model_copy(update={"messages": request.messages[length:], "conversation": ref, "chained": True})

    def learn(self, tail: list[Message], ref: ConversationRef) -> None:
        if tail:
            self._known.append((len(tail), tail[-1], ref))

    def commit(self, tail: list[Message]) -> tuple[ConversationRef | None, list[Message]]:
        """The stored conversation and the messages after it that ``tail`` ends the turn with."""
        length, ref = self._longest_known(tail)
        return ref, tail[length:]


__all__ = ["ConversationChain"]
