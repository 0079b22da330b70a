"""What a call derives from its conversation, kept per prefix so the next call derives it for its new messages only.

Every ``llm.call`` of a chained conversation checks the whole message list
(role order, its size against the window), gives tool calls ids unique in it
and encodes it for the provider, though only its last few messages are new:
at 200 steps that is 400 messages a call, for 2 new ones. Each of those is a
*fold* over the messages (a state fed one message at a time), so a call can
resume it from the state its conversation's stored prefix left.

``KnownPrefix`` is such a prefix: the messages the conversation store loaded
and verified (kept per owner and head, beside them) and the states folded over
them. ``Folds`` is one call's view: the prefix it resumes from (``known``) and
the one it leaves for the next call (``following``: the conversation this
call stores).

What keeps it exact:

- a state is resumed only when the call's messages begin with the prefix's
  very message objects (one identity test a message: messages are immutable
  values), so a compacted, rebuilt or foreign list folds from the start;
- a fold gives the same state resumed as from scratch (each fold's tests
  prove it), so a worker without the cache sends and decides exactly what one
  with it does: the cache saves work and changes no result;
- states live in the conversation store's cache entries, so they are bounded
  by it, and dropped with the prefix they belong to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .messages import Message

S = TypeVar("S")


class KnownPrefix:
    """A verified conversation prefix and the fold states derived from it (by kind)."""

    __slots__ = ("messages", "_states")

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages: tuple[Message, ...] = tuple(messages)
        self._states: dict[str, Any] = {}

    def begins(self, messages: Sequence[Message]) -> bool:
        """``messages`` starts with this prefix's own message objects."""
        mine = self.messages
        if len(messages) < len(mine):
            return False
        return all(a is b for a, b in zip(mine, messages))

    def state(self, kind: str) -> Any:
        return self._states.get(kind)

    def keep(self, kind: str, state: Any) -> None:
        self._states[kind] = state

    def kinds(self) -> list[str]:
        return sorted(self._states)


class Folds:
    """One call's fold states: resumed from ``known``, left on ``following`` for the call after it."""

    __slots__ = ("known", "following", "_begins")

    def __init__(self, known: KnownPrefix | None = None, following: KnownPrefix | None = None) -> None:
        self.known = known
        self.following = following
        self._begins: dict[int, tuple[Sequence[Message], bool, bool]] = {}

    def _matches(self, messages: Sequence[Message]) -> tuple[bool, bool]:
        """(resumable from ``known``, exactly ``following``'s messages), tested once per list."""
        if self.known is None and self.following is None:
            return False, False
        seen = self._begins.get(id(messages))
        if seen is not None and seen[0] is messages:
            return seen[1], seen[2]
        resume = self.known is not None and self.known.begins(messages)
        leave = (
            self.following is not None
            and len(self.following.messages) == len(messages)
            and self.following.begins(messages)
        )
        self._begins[id(messages)] = (messages, resume, leave)
        return resume, leave

    def fold(
        self,
        kind: str,
        messages: Sequence[Message],
        start: Callable[[], S],
        step: Callable[[S, Message], S],
        copy: Callable[[S], S] = lambda state: state,
    ) -> S:
        """``step`` fed every message of ``messages`` from ``start()``, resuming a kept state where one applies.

        ``step`` returns the next state (it may update the one it is given in place; ``copy`` then
        copies a state, so a kept one is never changed by a later call). The state returned is the
        caller's to use and change.
        """
        resume, leave = self._matches(messages)
        state, fed = None, 0
        if resume:
            assert self.known is not None
            kept = self.known.state(kind)
            if kept is not None:
                state, fed = copy(kept), len(self.known.messages)
        if state is None:
            state = start()
        for message in messages[fed:] if fed else messages:
            state = step(state, message)
        if leave:
            assert self.following is not None
            self.following.keep(kind, copy(state))
        return state


NO_FOLDS = Folds()
"""No kept states: every fold starts from scratch (what a worker without the cache does)."""


def fold(
    folds: Folds | None,
    kind: str,
    messages: Sequence[Message],
    start: Callable[[], S],
    step: Callable[[S, Message], S],
    copy: Callable[[S], S] = lambda state: state,
) -> S:
    return (folds or NO_FOLDS).fold(kind, messages, start, step, copy)


__all__ = ["Folds", "KnownPrefix", "NO_FOLDS", "fold"]
