"""Tool-call ids made unique per run by the engine, whatever the model sends.

Some OpenAI-compatible servers number calls per answer (``call_0`` in every
turn), and a model may send one id twice or none at all. The engine's history
(the precondition pairing each tool result with its call, step records, tool
activity inputs) needs one id per call, so an answer's call whose id is blank
or already used in the conversation gets an engine id, and keeps the id the
provider sent in ``provider_id`` (for the record). The adapters send the
engine's id on the wire: echoing ``call_0`` back twice in one conversation is
what Anthropic rejects (``tool_use`` ids must be unique).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..persisted_ids import engine_call_id
from .messages import LLMToolCall, Message
from .prefix import Folds, fold


class _Used:
    """The ids ``history`` uses (tool calls and the results answering them) and its assistant turns."""

    __slots__ = ("ids", "turns")

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.turns = 0

    def copy(self) -> _Used:
        other = _Used()
        other.ids, other.turns = set(self.ids), self.turns
        return other

    def step(self, m: Message) -> _Used:
        if m.tool_call_id:
            self.ids.add(m.tool_call_id)
        for c in m.tool_calls:
            self.ids.add(c.id)
        if m.role == "assistant":
            self.turns += 1
        return self


def with_engine_call_ids(answer: Message, history: Sequence[Message], folds: Folds | None = None) -> Message:
    """``answer`` with every tool-call id unique in ``history`` plus the answer; unchanged when already so.

    ``history``'s ids are a fold, resumed from a stored prefix's (``folds``): the same answer either way.
    """
    if not answer.tool_calls:
        return answer
    seen = fold(folds, "call_ids.used", history, _Used, _Used.step, _Used.copy)
    used, turn = seen.ids, seen.turns
    calls: list[LLMToolCall] = []
    for i, call in enumerate(answer.tool_calls):
        if call.id and call.id not in used:
            calls.append(call)
            used.add(call.id)
            continue
        engine_id, n = engine_call_id(turn, i), 0
        while engine_id in used:
            n += 1
            engine_id = engine_call_id(turn, i, n)
        used.add(engine_id)
        calls.append(call.model_copy(update={"id": engine_id, "provider_id": call.id}))
    if all(a is b for a, b in zip(calls, answer.tool_calls)):
        return answer
    return answer.model_copy(update={"tool_calls": tuple(calls)})


__all__ = ["with_engine_call_ids"]
