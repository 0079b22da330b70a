"""Tool-call ids made unique per run by the engine, whatever the model sends.

Some OpenAI-compatible servers number calls per answer (``call_0`` in every
turn), and a model may send one id twice or none at all. The engine's history
(the precondition pairing each tool result with its call, step records, tool
activity inputs) needs one id per call, so an answer's call whose id is blank
or already used in the conversation gets an engine id, and keeps the id the
provider sent in ``provider_id``: the adapters send that one back on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence

from .messages import LLMToolCall, Message


def _used_ids(history: Sequence[Message]) -> set[str]:
    used = {m.tool_call_id for m in history if m.tool_call_id}
    used |= {c.id for m in history for c in m.tool_calls}
    return used


def with_engine_call_ids(answer: Message, history: Sequence[Message]) -> Message:
    """``answer`` with every tool-call id unique in ``history`` plus the answer; unchanged when already so."""
    if not answer.tool_calls:
        return answer
    used = _used_ids(history)
    turn = sum(1 for m in history if m.role == "assistant")
    calls: list[LLMToolCall] = []
    for i, call in enumerate(answer.tool_calls):
        if call.id and call.id not in used:
            calls.append(call)
            used.add(call.id)
            continue
        engine_id, n = f"call_{turn}_{i}", 0
        while engine_id in used:
            n += 1
            engine_id = f"call_{turn}_{i}_{n}"
        used.add(engine_id)
        calls.append(call.model_copy(update={"id": engine_id, "provider_id": call.id}))
    if all(a is b for a, b in zip(calls, answer.tool_calls)):
        return answer
    return answer.model_copy(update={"tool_calls": tuple(calls)})


def wire_call_ids(history: Sequence[Message]) -> dict[str, str]:
    """Engine id -> the id the provider sent, for every call the engine renamed."""
    return {c.id: c.provider_id for m in history for c in m.tool_calls if c.provider_id is not None}


__all__ = ["with_engine_call_ids", "wire_call_ids"]
