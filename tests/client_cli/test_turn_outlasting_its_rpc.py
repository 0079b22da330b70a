"""A turn that outlasts the RPC carrying it is answered once: never lost to the caller, never run twice.

At 10,000 sessions (``bench/fleet.py``, 3 workers on two cores) the server gave
up on 8 of 33,000 turns' RPCs ("context deadline exceeded") while the turns
ran: their callers lost them, and 5 next turns were refused busy. The client
now sends an update again under the same update id (``client/update_retry.py``).
Here a client interceptor gives each update RPC a short deadline, as a loaded
server does, against a model that answers slowly: a real server, worker and
model, nothing mocked.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from session_support import memory_script, session_id, turn
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    StartWorkflowUpdateInput,
    StartWorkflowUpdateWithStartInput,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.contrib.pydantic import pydantic_data_converter

from agentsteps.client.sessions import continue_session, session_handle, session_state
from agentsteps.client.update_retry import until_answered
from agentsteps.contracts.errors import TurnAlreadyAnsweredError
from agentsteps.contracts.names import TURN_UPDATE
from agentsteps.contracts.session import SessionConfig, TurnInput, TurnResult
from agentsteps.failures.unwrap import typed_failures

SLOW_REPLY_SECONDS = 0.8
"""Each model reply's delay: a turn (two replies) outlasts a deadline of ``DEADLINE``."""
DEADLINE = timedelta(seconds=0.4)


def slow_weather_script(reply_seconds: float = SLOW_REPLY_SECONDS) -> dict[str, Any]:
    return {
        "rules": [
            {
                "match": {"tool_result_for": "get_weather"},
                "reply": {"content": "Lisbon is sunny", "delay_seconds": reply_seconds},
            },
            {
                "match": {"role": "user"},
                "reply": {
                    "tool_calls": [{"name": "get_weather", "arguments": {"city": "Lisbon"}}],
                    "delay_seconds": reply_seconds,
                },
            },
        ]
    }


class Deadlines(Interceptor):
    """Every update RPC of the client gets ``deadline`` (None: the SDK's); each send's update id is recorded."""

    def __init__(self, deadline: timedelta | None) -> None:
        self.deadline = deadline
        self.sent: list[str] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Outbound(next, self)


class _Outbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, owner: Deadlines) -> None:
        super().__init__(next)
        self.owner = owner

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle[Any]:
        self.owner.sent.append(input.update_id or "")
        input.rpc_timeout = self.owner.deadline or input.rpc_timeout
        return await super().start_workflow_update(input)

    async def start_update_with_start_workflow(
        self, input: StartWorkflowUpdateWithStartInput
    ) -> WorkflowUpdateHandle[Any]:
        self.owner.sent.append(input.update_workflow_input.update_id or "")
        input.rpc_timeout = self.owner.deadline or input.rpc_timeout
        return await super().start_update_with_start_workflow(input)


async def client_with(engine: Any, deadlines: Deadlines) -> Client:
    return await Client.connect(
        engine.client.service_client.config.target_host,
        namespace=engine.client.namespace,
        data_converter=pydantic_data_converter,
        interceptors=[deadlines],
    )


async def test_turns_that_outlast_their_rpc_deadline_are_answered_once_under_one_update_id(engine, scripted):
    scripted.set_script(slow_weather_script())
    deadlines = Deadlines(DEADLINE)
    engine.client = await client_with(engine, deadlines)
    sid = session_id()

    first = await turn(engine, sid, "weather in Lisbon?")  # update-with-start
    sends_of_first = list(deadlines.sent)
    second = await continue_session(engine.client, sid, "and now?")
    sends_of_second = deadlines.sent[len(sends_of_first) :]

    assert (first.turn, second.turn) == (1, 2) and second.output == "Lisbon is sunny"
    for sends in (sends_of_first, sends_of_second):
        assert len(sends) > 1, "the deadline passed before the answer, so the update was sent again"
        assert len(set(sends)) == 1, f"every send of one turn carries its one update id: {sends}"
    assert len(scripted.requests) == 4, "two model calls a turn: no turn ran twice"
    assert (await session_state(engine.client, sid)).turns == 2


async def test_a_turn_given_up_after_its_attempts_still_completes_once_and_its_id_answers_it(engine, scripted):
    scripted.set_script(slow_weather_script(reply_seconds=2.0))
    engine.client = await client_with(engine, Deadlines(DEADLINE))
    sid = session_id()
    await turn(engine, sid, "hello")  # the session is open
    handle = session_handle(engine.client, sid)
    ids: list[str] = []

    async def send(update_id: str) -> TurnResult:
        ids.append(update_id)
        result: TurnResult = await handle.execute_update(
            TURN_UPDATE, TurnInput(input="weather?"), id=update_id, result_type=TurnResult
        )
        return result

    with pytest.raises(WorkflowUpdateRPCTimeoutOrCancelledError):
        await until_answered(send, attempts=2)  # 0.4 + 0.5 + 0.4 s, against a 4 s turn
    assert len(ids) == 2 and ids[0] == ids[1]

    # The turn the caller gave up on was not lost: asked again under its id, it answers as turn 2, once.
    late: TurnResult = await session_handle(await client_with(engine, Deadlines(None)), sid).execute_update(
        TURN_UPDATE, TurnInput(input="weather?"), id=ids[0], result_type=TurnResult
    )
    assert late.turn == 2 and late.output == "Lisbon is sunny"
    assert len(scripted.requests) == 4, "two model calls a turn: the given-up turn ran once"
    assert (await session_state(engine.client, sid)).turns == 2


async def test_a_caller_that_cancels_its_turn_is_not_sent_again(engine, scripted):
    scripted.set_script(slow_weather_script())
    deadlines = Deadlines(None)
    engine.client = await client_with(engine, deadlines)
    sid = session_id()
    await turn(engine, sid, "hello")
    sent_before = len(deadlines.sent)

    with pytest.raises((TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError)):
        await asyncio.wait_for(continue_session(engine.client, sid, "weather?"), timeout=0.3)
    await asyncio.sleep(1.0)  # past the first backoff (0.5 s): a retry would have been sent by now
    assert len(deadlines.sent) - sent_before == 1


async def test_a_turn_resent_after_the_session_continued_as_new_is_refused_not_run_again(engine, scripted):
    # Within a run the server answers a repeated update id; across a continue-as-new only the session can.
    scripted.set_script(memory_script())
    sid = session_id()
    await turn(engine, sid, "hello", config=SessionConfig(continue_after_events=100))
    handle = session_handle(engine.client, sid)
    first_run = (await handle.describe()).run_id
    resent = TurnInput(input="weather in Lisbon?")
    answered: TurnResult = await handle.execute_update(TURN_UPDATE, resent, id="turn-resent", result_type=TurnResult)
    for n in range(10):
        if (await handle.describe()).run_id != first_run:
            break
        await continue_session(engine.client, sid, f"weather {n}?")
    assert (await handle.describe()).run_id != first_run, "the session continued as new"
    requests, turns = len(scripted.requests), (await session_state(engine.client, sid)).turns

    with pytest.raises(TurnAlreadyAnsweredError, match=f"turn {answered.turn} already answered update turn-resent"):
        with typed_failures():
            await handle.execute_update(TURN_UPDATE, resent, id="turn-resent", result_type=TurnResult)
    assert len(scripted.requests) == requests and (await session_state(engine.client, sid)).turns == turns
    assert (await continue_session(engine.client, sid, "and now?")).turn == turns + 1, "the session goes on"
