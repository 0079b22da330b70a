"""Token streaming in a session (``stream_tokens``): the answer's text arrives on the progress stream,
in order and in batches, while the call runs; the completed answer stays what counts."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from session_support import failure_of, session_id, turn
from temporalio.client import WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from agentsteps.contracts.errors import NonRetryableProviderError
from agentsteps.contracts.names import PROGRESS_TOPIC
from agentsteps.contracts.session import ProgressEvent, SessionConfig

ANSWER = "Lisbon is sunny today, 24 degrees, with a light breeze from the Atlantic and no rain expected."
STREAMING = SessionConfig(stream_tokens=True)
SLOW = {"chunk_chars": 4, "delay_seconds": 0.02}  # ~23 deltas over ~0.5 s: several 100 ms batches


async def follow(client, sid: str, events: list[ProgressEvent], turns: int = 1) -> None:
    stream = WorkflowStreamClient.create(client, sid)
    ended = 0
    async for item in stream.subscribe(
        [PROGRESS_TOPIC], result_type=ProgressEvent, poll_cooldown=timedelta(milliseconds=20)
    ):
        events.append(item.data)
        ended += item.data.kind == "turn_ended"
        if ended == turns:
            return


async def streamed_turn(engine, sid: str, text: str, events: list[ProgressEvent], **spec):
    running = asyncio.ensure_future(turn(engine, sid, text, config=STREAMING, tools=[], **spec))
    await asyncio.sleep(0.2)  # the session exists before anyone follows it
    following = asyncio.ensure_future(follow(engine.client, sid, events))
    try:
        return await running
    finally:
        await asyncio.wait_for(following, timeout=30)


async def test_a_turns_answer_arrives_as_token_deltas_in_order_and_equals_the_final_answer(engine, scripted):
    scripted.set_script({"default": {"content": ANSWER, "stream": SLOW}})
    events: list[ProgressEvent] = []
    result = await streamed_turn(engine, session_id(), "weather in Lisbon?", events)

    tokens = [e for e in events if e.kind == "token"]
    assert result.output == ANSWER
    assert "".join(e.detail for e in tokens) == ANSWER
    assert 2 <= len(tokens) < 23  # batched: more than one event, fewer than the deltas the model sent
    kinds = [e.kind for e in events]
    assert kinds.index("turn_started") < kinds.index("token") and kinds.index("step") > max(
        i for i, k in enumerate(kinds) if k == "token"
    )  # all text is on the stream before the step it made
    assert {(e.turn, e.attempt) for e in tokens} == {(1, 1)}
    assert scripted.requests[0].body["stream"] is True


async def test_without_stream_tokens_the_model_is_not_asked_to_stream(engine, scripted):
    scripted.set_script({"default": {"content": ANSWER}})
    await turn(engine, session_id(), "weather in Lisbon?", tools=[])
    assert "stream" not in scripted.requests[0].body


@pytest.mark.parametrize("fault", ["truncated", "cut_after_finish", "error_event"])
async def test_a_cut_stream_or_an_overload_event_is_retried_and_the_retry_streams_the_whole_answer(
    engine, scripted, fault
):
    scripted.set_script(
        {
            "rules": [
                {"match": {}, "times": 1, "reply": {"content": ANSWER, "stream": {**SLOW, "fault": fault}}},
                {"match": {}, "reply": {"content": ANSWER, "stream": SLOW}},
            ]
        }
    )
    events: list[ProgressEvent] = []
    result = await streamed_turn(
        engine, session_id(), "weather in Lisbon?", events, llm_policy={"initial_interval_seconds": 0.1}
    )

    assert result.output == ANSWER and len(scripted.requests) == 2
    by_attempt: dict[int, str] = {}
    for e in events:
        if e.kind == "token":
            by_attempt[e.attempt] = by_attempt.get(e.attempt, "") + e.detail
    if fault != "cut_after_finish":  # cut after the finish, the first attempt had streamed the whole text
        assert ANSWER.startswith(by_attempt[1]) and by_attempt[1] != ANSWER  # the broken attempt's text, advisory
    assert by_attempt[2] == ANSWER


@pytest.mark.parametrize("fault", ["malformed", "no_usage"])
async def test_a_broken_stream_fails_the_turn_typed_and_the_session_loses_nothing(engine, scripted, fault):
    sid = session_id()
    scripted.set_script(
        {
            "rules": [
                {"match": {"contains": "first"}, "reply": {"content": "noted: the code is 7"}},
                {"match": {"contains": "broken"}, "reply": {"content": ANSWER, "stream": {"fault": fault}}},
                {"match": {"contains": "code", "any_contains": "the code is 7"}, "reply": {"content": "it was 7"}},
            ]
        }
    )
    await turn(engine, sid, "first: remember the code 7", config=STREAMING, tools=[])
    with pytest.raises(NonRetryableProviderError) as caught:
        await turn(engine, sid, "broken answer please", config=STREAMING, tools=[])
    error = failure_of(caught.value)
    assert error.type == "NonRetryableProviderError" and "malformed provider response" in error.message
    again = await turn(engine, sid, "what was the code?", config=STREAMING, tools=[])
    assert again.output == "it was 7" and again.turn == 3
