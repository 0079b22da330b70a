"""The fold from a session's progress log to what a reader shows: each piece of the answer once, in order."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentsteps.client.transcript import StreamItem, Transcript, apply
from agentsteps.contracts.session import ProgressEvent, text_digest

pytestmark = pytest.mark.fast
AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
ANSWER = "The refund is on its way."


def token(text: str, offset: int | None, *, attempt: int = 1, model: str = "m-1", step: int = 0) -> ProgressEvent:
    return ProgressEvent(
        kind="token", turn=1, at=AT, step=step, detail=text, attempt=attempt, offset=offset, model=model
    )


def step_done(text: str, step: int = 0) -> ProgressEvent:
    return ProgressEvent(
        kind="step", turn=1, at=AT, step=step, detail="final", text_chars=len(text), text_digest=text_digest(text)
    )


def fold(events: list[ProgressEvent], answers: dict[int, str] | None = None) -> tuple[list[StreamItem], Transcript]:
    t = Transcript()
    items = []
    log = [ProgressEvent(kind="turn_started", turn=1, at=AT), *events, ProgressEvent(kind="turn_ended", turn=1, at=AT)]
    for position, event in enumerate(log):
        answer = (answers or {}).get(event.step or 0) if t.needs_answer(event) else None
        item = t.add(position, event, answer)
        if item is not None:
            items.append(item)
    return items, t


def shown(items: list[StreamItem]) -> str:
    text = ""
    for item in items:
        if item.kind == "text" or item.corrected:
            text = apply(text, item)
    return text


def test_a_retried_attempts_replayed_prefix_is_folded_away_and_the_rest_shown_once():
    events = [
        token("The refund ", 0),
        token("is on", 11),  # the worker dies here
        token("The refund is on its", 0, attempt=2),  # the retry streams from the start
        token(" way.", 20, attempt=2),
        step_done(ANSWER),
    ]
    items, t = fold(events)
    pieces = [i.text for i in items if i.kind == "text"]
    assert pieces == ["The refund ", "is on", " its", " way."] and shown(items) == ANSWER
    assert items[-1].kind == "turn_ended" and items[-1].agrees is True and t.corrections == t.revisions == 0


def test_a_retry_that_answers_otherwise_replaces_from_where_it_differs_and_is_counted():
    events = [token("The refund was", 0), token("The refund is on its way.", 0, attempt=2), step_done(ANSWER)]
    items, t = fold(events)
    revised = [i for i in items if i.kind == "text"][1]
    assert (revised.at, revised.text) == (11, "is on its way.") and shown(items) == ANSWER
    assert t.revisions == 1 and items[-1].agrees is True


def test_a_fallback_model_is_said_once_and_its_answer_starts_over():
    events = [
        token("Primary says", 0, model="m-1"),
        token("The refund ", 0, model="m-2"),
        token("is on its way.", 11, model="m-2"),
        step_done(ANSWER),
    ]
    items, _ = fold(events)
    texts = [i for i in items if i.kind == "text"]
    assert [i.fallback for i in texts] == [False, True, False] and shown(texts[1:]) == ANSWER


def test_a_lost_batch_is_never_shown_with_a_hole_and_is_filled_from_the_completed_answer():
    events = [token("The refund ", 0), token("its way.", 17), step_done(ANSWER)]  # "is on " never arrived
    items, t = fold(events, answers={0: ANSWER})
    assert [i.text for i in items if i.kind == "text"] == ["The refund "]
    fill = next(i for i in items if i.corrected)
    assert (fill.at, fill.text) == (11, "is on its way.") and shown(items) == ANSWER
    assert t.corrections == 1 and items[-1].agrees is True


def test_an_answer_that_cannot_be_read_back_ends_the_turn_saying_the_stream_does_not_agree():
    items, _ = fold([token("The refund ", 0), step_done(ANSWER)], answers={})
    assert items[-1].kind == "turn_ended" and items[-1].agrees is False


def test_events_of_an_earlier_release_without_offsets_fold_by_attempt():
    events = [token("The refund ", None), token("The refund is on its way.", None, attempt=2), step_done(ANSWER)]
    items, _ = fold(events)
    assert shown(items) == ANSWER and items[-1].agrees is True


def test_the_same_log_folds_to_the_same_items_whenever_a_reader_reads_it():
    events = [token("The refund ", 0), token("The refund is on its way.", 0, attempt=2), step_done(ANSWER)]
    assert fold(events)[0] == fold(events)[0]
