"""Side effects once per run: keys that name the effect, and the run's record of effects.

A key is a digest of the workflow chain (workflow id + the chain's first run
id), the logical step (``scope``), the tool, its canonical arguments, and the
call's ordinal among identical calls in that step. It holds no run id and no
attempt number, so it is the same across activity retries, re-prompts,
fallback models and ``temporal workflow reset`` (the reset run keeps the
chain's first run id), and a new run that reuses a workflow id gets new keys.
Its format, and every other persisted id's, is ``contracts/persisted_ids.py``'s.

The ledger answers a repeat of a completed side-effecting call from its record,
without calling the tool again, so even a tool that does not dedupe runs once
per key. Deterministic: pure computation on workflow state.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import EffectRecord, Message, ToolCallResult
    from ..contracts.llm.arguments import RECORD_CHARS, canonical_arguments, cap
    from ..contracts.llm.tools import OUTCOME_UNKNOWN
    from ..contracts.persisted_ids import effect_chain
    from ..contracts.persisted_ids import effect_key as canonical_effect_key
    from ..contracts.session import UntoldEffects

_NOTE_CHARS = 300
_NOTE_ENTRIES = 40


def effect_key(chain: str, scope: str, tool: str, arguments: str, ordinal: int) -> str:
    return canonical_effect_key(chain, scope, tool, canonical_arguments(arguments), ordinal)


def run_chain(key_scope: str | None = None) -> str:
    """What effect keys are unique in: the workflow chain, or the backend's ``key_scope`` for the run."""
    info = workflow.info()
    return effect_chain(info.workflow_id, info.first_execution_run_id, key_scope)


class EffectLedger:
    """Keys for this run's calls, and the side-effecting ones that took effect (into ``records``)."""

    def __init__(self, chain: str, records: list[EffectRecord]) -> None:
        self._chain = chain
        self._ordinals: dict[tuple[str, str, str], int] = {}
        self._results: dict[str, ToolCallResult] = {}
        self.records = records
        self._inherited: dict[tuple[str, str], EffectRecord] = {}
        self.inherited_from: str | None = None

    def inherit(self, source: str, records: list[EffectRecord]) -> None:
        """A fork's source run's effects: an identical call is answered from them, whatever its step or ordinal."""
        self.inherited_from = source
        for record in records:
            self._inherited.setdefault((record.tool, record.arguments), record)

    def inherited(self, tool: str, arguments: str, call_id: str) -> ToolCallResult | None:
        """The source run's result for this exact call, if the source made it: never executed again."""
        if not self._inherited:  # most runs are not forks: no arguments to parse for every call
            return None
        record = self._inherited.get((tool, cap(canonical_arguments(arguments), RECORD_CHARS)))
        if record is None:
            return None
        return ToolCallResult(call_id=call_id, name=tool, content=record.content)

    def new_attempt(self) -> None:
        """A new answer to the same logical step (a re-prompted or fallback program): ordinals restart."""
        self._ordinals.clear()

    def key(self, scope: str, tool: str, arguments: str) -> str:
        """The key of the next call to ``tool`` with ``arguments`` in ``scope``; call before any await."""
        canonical = canonical_arguments(arguments)
        ident = (scope, tool, canonical)
        ordinal = self._ordinals.get(ident, 0)
        self._ordinals[ident] = ordinal + 1
        return canonical_effect_key(self._chain, scope, tool, canonical, ordinal)

    def completed(self, key: str, call_id: str) -> ToolCallResult | None:
        found = self._results.get(key)
        return None if found is None else found.model_copy(update={"call_id": call_id})

    def record(self, key: str, tool: str, arguments: str, result: ToolCallResult) -> None:
        """Remember a call that took effect (or may have); a tool's own refusal is not an effect."""
        unknown = result.error_type == OUTCOME_UNKNOWN
        if (result.is_error and not unknown) or key in self._results:
            return
        self._results[key] = result
        self.records.append(
            EffectRecord(
                key=key,
                tool=tool,
                arguments=cap(canonical_arguments(arguments), RECORD_CHARS),
                content=cap(result.content, RECORD_CHARS),
                outcome="unknown" if unknown else "done",
            )
        )

    def inherited_note(self, python_name: Callable[[str], str] = str) -> str | None:
        """What a fork's model must know first: the source run's effects, which the world keeps."""
        if not self._inherited:
            return None
        lines = [
            f"These calls with side effects already took effect in {self.inherited_from}, and are not undone. "
            "They will not run again: an identical call (same function, same arguments) "
            "returns the recorded result below. Do not repeat them with changed arguments unless you mean a "
            "second, separate effect."
        ]
        records = list(self._inherited.values())
        lines += [_line(r, python_name) for r in records[:_NOTE_ENTRIES]]
        if len(records) > _NOTE_ENTRIES:
            lines.append(f"- ... and {len(records) - _NOTE_ENTRIES} more")
        return "\n".join(lines)

    def note(self, python_name: Callable[[str], str] = str) -> str | None:
        """What the model must be told before it answers again: the calls that already took effect."""
        if not self.records:
            return None
        lines = [
            "These calls with side effects already took effect in this run. They will not run again: "
            "an identical call (same function, same arguments) returns the recorded result below. "
            "Do not repeat them with changed arguments unless you mean a second, separate effect."
        ]
        lines += [_line(record, python_name) for record in self.records[:_NOTE_ENTRIES]]
        if len(self.records) > _NOTE_ENTRIES:
            lines.append(f"- ... and {len(self.records) - _NOTE_ENTRIES} more")
        return "\n".join(lines)


def _line(record: EffectRecord, python_name: Callable[[str], str]) -> str:
    shown = "outcome unknown: it may or may not have happened" if record.outcome == "unknown" else "returned"
    call = f"{python_name(record.tool)}({cap(record.arguments, _NOTE_CHARS)})"
    return f"- {call} {shown}: {cap(record.content, _NOTE_CHARS)}"


def untold_note(turns: list[UntoldEffects]) -> str:
    """What the next turn's model must know: calls that took effect in turns whose answer was lost."""
    if not turns:
        return ""
    lines = [
        "Earlier turns that failed or were cancelled still had side effects: these calls took effect "
        "(the conversation above does not show them). Do not repeat one unless the user asks for a "
        "second, separate effect."
    ]
    for told in turns:
        for record in told.effects:
            shown = "outcome unknown: it may or may not have happened" if record.outcome == "unknown" else "returned"
            lines.append(
                f"- turn {told.turn} ({told.status}): {record.tool}({cap(record.arguments, _NOTE_CHARS)}) {shown}: "
                f"{cap(record.content, _NOTE_CHARS)}"
            )
        if told.more:
            lines.append(f"- turn {told.turn}: ... and {told.more} more")
    return "\n\n" + "\n".join(lines)


def with_note(messages: list[Message], note: str | None) -> list[Message]:
    """``messages`` with ``note`` added to the last user message (or as one), so roles still alternate."""
    if not note:
        return messages
    if messages and messages[-1].role == "user":
        last = messages[-1]
        return [*messages[:-1], last.model_copy(update={"content": f"{last.content or ''}\n\n{note}"})]
    return [*messages, Message.user(note)]


__all__ = [
    "RECORD_CHARS",
    "EffectLedger",
    "canonical_arguments",
    "cap",
    "effect_key",
    "run_chain",
    "untold_note",
    "with_note",
]
