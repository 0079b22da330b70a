"""A session's progress events folded into one transcript: each piece of the answer once, in order.

The progress stream is a log: a retried ``llm.call`` streams its answer again
from the start, a fallback model starts a new answer, and a batch can be lost
with a worker. ``Transcript`` reads that log and says, for each event, what a
reader shows (a ``StreamItem``): the new characters of a step's answer and
where they go, never a replayed prefix; a fallback once; and at each ``step``
the check against the completed answer (its length and digest travel on the
event), which is authoritative: a mismatch (a lost batch, a retry that answered
differently) is corrected from the answer itself and counted. ``turn_ended``
says whether the turn's transcript agrees.

The fold is a pure function of the log from a turn's start, so every reader,
whenever it connects, sees the same item at the same position: that is what
makes ``Last-Event-ID`` resume exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..contracts.session import ProgressEvent, text_digest


@dataclass(frozen=True)
class StreamItem:
    """What a reader shows for the event at ``position`` (the stream offset: stable, resumable)."""

    position: int
    kind: str
    """``text`` for a piece of an answer (a ``token`` event), ``gap`` for events past retention, else the
    event's own kind (``turn_started``, ``step``, ``tool_call``, ``approval_requested``, ``turn_ended`` ...)."""
    turn: int
    step: int | None = None
    text: str = ""
    """``text`` (and a correcting ``step``): the characters to show, starting at ``at`` in the step's answer."""
    at: int = 0
    """Where ``text`` goes; below what the reader holds for the step it replaces from there (a correction)."""
    model: str | None = None
    fallback: bool = False
    """This text is the first of another model's answer in the turn (said once)."""
    corrected: bool = False
    """``text`` came from the completed answer, not the stream (a lost batch, a retry that answered otherwise)."""
    agrees: bool | None = None
    """``turn_ended``: the turn's streamed text equals its completed answers (after any correction)."""
    event: ProgressEvent | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON an SSE ``data`` line carries (the console page and the HTTP endpoint)."""
        e = self.event
        out: dict[str, Any] = {"position": self.position, "kind": self.kind, "turn": self.turn, "step": self.step}
        if self.kind == "text" or self.corrected:
            out.update(text=self.text, at=self.at, model=self.model, fallback=self.fallback, corrected=self.corrected)
        if e is not None:
            out.update(tool=e.tool or "", detail=e.detail)
            if e.usage is not None:
                out["usage"] = e.usage.model_dump(mode="json")
            if e.approval is not None:
                out["approval"] = e.approval.model_dump(mode="json")
        if self.kind == "turn_ended":
            out["agrees"] = self.agrees
        return out


@dataclass
class _Step:
    text: str = ""
    model: str | None = None
    attempt: int | None = None
    streamed: bool = False
    broken: bool = False
    """A batch went missing (an offset past the text held): the step event repairs it."""


@dataclass
class Transcript:
    """The fold; ``add`` one event at a time, in stream order."""

    turn: int = 0
    steps: dict[int, _Step] = field(default_factory=dict)
    model: str | None = None
    agrees: bool = True
    corrections: int = 0
    """Repairs from the completed answer over the whole fold (0 when the stream was whole)."""
    revisions: int = 0
    """Retried calls that answered otherwise than the text already shown (0 with a deterministic model)."""

    def needs_answer(self, event: ProgressEvent) -> bool:
        """True for a ``step`` whose streamed text does not match its completed answer: pass that answer to ``add``."""
        if event.kind != "step" or event.step is None or event.text_digest is None:
            return False
        held = self.steps.get(event.step)
        return held is not None and held.streamed and text_digest(held.text) != event.text_digest

    def add(self, position: int, event: ProgressEvent, answer: str | None = None) -> StreamItem | None:
        """The item for this event, or None when a reader has nothing new to show (a replayed prefix)."""
        if event.kind == "turn_started":
            self.turn, self.steps, self.model, self.agrees = event.turn, {}, None, True
        if event.kind == "token":
            return self._token(position, event)
        if event.kind == "step" and self.needs_answer(event):
            return self._correct(position, event, answer)
        agrees = self.agrees if event.kind == "turn_ended" else None
        return StreamItem(position, event.kind, event.turn, event.step, agrees=agrees, event=event)

    def _token(self, position: int, e: ProgressEvent) -> StreamItem | None:
        index = e.step or 0
        held = self.steps.setdefault(index, _Step())
        fallback = False
        if e.model and held.model and e.model != held.model:
            held.text, held.broken = "", False  # another model's answer: it starts over
        if e.model and self.model and e.model != self.model:
            fallback = True
        self.model = e.model or self.model
        held.model = e.model or held.model
        held.streamed = True
        # Events from a release before offsets: a new attempt starts over, the same one continues.
        offset = e.offset if e.offset is not None else (len(held.text) if e.attempt == held.attempt else 0)
        held.attempt = e.attempt
        text, piece = held.text, e.detail
        if offset > len(text):
            held.broken = True  # a batch is missing; never show text with a hole: the step event repairs it
            return None
        overlap = text[offset : offset + len(piece)]
        differs = next((i for i, (a, b) in enumerate(zip(overlap, piece, strict=False)) if a != b), None)
        if differs is not None:  # the retry answered otherwise: from there on its text replaces what was shown
            at = offset + differs
            self.revisions += 1
            held.text = text[:at] + piece[differs:]
            return StreamItem(position, "text", e.turn, index, piece[differs:], at, e.model, fallback, corrected=False)
        if offset + len(piece) <= len(text):
            return None  # the retried attempt's replayed prefix: already shown
        new = piece[len(text) - offset :]
        held.text = text + new
        return StreamItem(position, "text", e.turn, index, new, len(text), e.model, fallback)

    def _correct(self, position: int, e: ProgressEvent, answer: str | None) -> StreamItem:
        assert e.step is not None
        held = self.steps[e.step]
        if answer is None or text_digest(answer) != e.text_digest:
            self.agrees = False  # the answer could not be read back: say so rather than guess
            return StreamItem(position, "step", e.turn, e.step, event=e)
        self.corrections += 1
        text = held.text
        at = (
            len(text)
            if answer.startswith(text)
            else next(
                (i for i, (a, b) in enumerate(zip(text, answer, strict=False)) if a != b), min(len(text), len(answer))
            )
        )
        held.text, held.broken = answer, False
        return StreamItem(position, "step", e.turn, e.step, answer[at:], at, held.model, corrected=True, event=e)


def apply(text: str, item: StreamItem) -> str:
    """A step's text after ``item``: what a reader holding ``text`` shows next."""
    return text[: item.at] + item.text


__all__ = ["StreamItem", "Transcript", "apply"]
