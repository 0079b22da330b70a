"""Readers cost the session nothing: however many follow it, turns, approvals and close go through.

Each process follows a session through one feed (``client/session_stream.py``): one query poller, shared by
its readers, never an Update per reader. Readers of an older release (the stream library's own long-poll
Update) are held to a few, so they cannot take the 10 Update slots Temporal gives a workflow either.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from approval_support import REFUND_SCRIPT, approval_worker
from session_support import failure_of, session_id, turn
from temporalio.client import WorkflowUpdateFailedError
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError

from agentsteps.client.session_stream import feeds_open, follow
from agentsteps.client.sessions import close_session, decide_approval, pending_approvals
from agentsteps.client.transcript import StreamItem
from agentsteps.contracts.errors import RunNotFoundError
from agentsteps.contracts.names import PROGRESS_TOPIC
from agentsteps.contracts.session import ProgressEvent, SessionConfig

STREAMING = SessionConfig(stream_tokens=True)
READERS = 50


async def read_until_closed(client, sid: str, into: list[StreamItem]) -> None:
    async for item in follow(client, sid):
        into.append(item)


async def test_fifty_readers_then_approve_a_turn_and_close_all_go_through_and_leave_nothing(client, settings, scripted):
    script = {**REFUND_SCRIPT, "default": {"content": "ok", "stream": {"chunk_chars": 3, "delay_seconds": 0.01}}}
    script["rules"] = [
        *REFUND_SCRIPT["rules"],
        {"match": {"contains": "thanks"}, "reply": {"content": "You are welcome."}},
    ]
    script["rules"].insert(0, script["rules"].pop())  # "thanks" before the catch-all refund rule
    scripted.set_script(script)
    sid = session_id()
    ran: list[str] = []
    async with approval_worker(client, settings, ran):
        engine = type("E", (), {"client": client, "task_queue": settings.task_queue})()
        first = asyncio.ensure_future(turn(engine, sid, "refund A-17", tools=["refund"], config=STREAMING))
        seen: list[list[StreamItem]] = [[] for _ in range(READERS)]
        readers = [asyncio.ensure_future(read_until_closed(client, sid, seen[i])) for i in range(READERS)]
        waiting = await _approval_waiting(client, sid)
        assert feeds_open() == 1  # fifty readers, one poller

        # Readers of an older release hold long-poll Updates; past a few they are refused, never the writers.
        old = [WorkflowStreamClient.create(client, sid) for _ in range(8)]
        old_readers = [
            asyncio.ensure_future(_drain(s.subscribe([PROGRESS_TOPIC], from_offset=10**6, result_type=ProgressEvent)))
            for s in old
        ]
        await asyncio.sleep(1.0)
        refused = [t.exception() for t in old_readers if t.done()]

        async with asyncio.timeout(10):
            await decide_approval(client, sid, waiting[0].approval_id, approve=True, approver="ana")
            assert (await first).output == "Refunded 40."
            second = await turn(engine, sid, "thanks", tools=["refund"], config=STREAMING)
            await close_session(client, sid, "done")
        async with asyncio.timeout(15):
            await asyncio.gather(*readers)
        for t in old_readers:
            t.cancel()
        await asyncio.gather(*old_readers, return_exceptions=True)

    assert second.output == "You are welcome." and len(ran) == 1
    assert len(refused) == 5 and all(failure_of(e).type == "StreamReadersFullError" for e in refused)
    assert all(items == seen[0] for items in seen)  # every reader, the same transcript
    texts = "".join(i.text for i in seen[0] if i.kind == "text" and i.turn == 2)
    assert texts == "You are welcome."
    ended = [i for i in seen[0] if i.kind == "turn_ended"]
    assert [(i.turn, i.agrees) for i in ended] == [(1, True), (2, True)]
    assert feeds_open() == 0  # the readers left: nothing polls the session any more


async def _approval_waiting(client, sid: str):
    async with asyncio.timeout(30):
        while True:
            try:
                if waiting := await pending_approvals(client, sid):
                    return waiting
            except (RPCError, RunNotFoundError):  # the turn has not started the session yet
                pass
            await asyncio.sleep(0.05)


async def _drain(stream) -> None:
    async for _ in stream:
        pass


async def test_a_reader_that_leaves_mid_turn_stops_the_feed_and_resumes_exactly_where_it_left(engine, scripted):
    answer = "Lisbon is sunny today, 24 degrees, with a light breeze from the Atlantic and no rain expected."
    scripted.set_script({"default": {"content": answer, "stream": {"chunk_chars": 4, "delay_seconds": 0.02}}})
    sid = session_id()
    running = asyncio.ensure_future(turn(engine, sid, "weather?", tools=[], config=STREAMING))
    first: list[StreamItem] = []
    async with asyncio.timeout(30), aclosing(follow(engine.client, sid)) as items:
        async for item in items:
            first.append(item)
            if item.kind == "text" and len(first) >= 3:
                break  # the page closed
    assert feeds_open() == 0
    await running
    rest = [i async for i in _until_turn_end(engine.client, sid, first[-1].position)]
    whole = [*first, *rest]
    assert "".join(i.text for i in whole if i.kind == "text") == answer
    positions = [i.position for i in whole]
    assert positions == sorted(set(positions))  # no item twice, in order
    assert whole[-1].kind == "turn_ended" and whole[-1].agrees is True
    assert rest[0].position > first[-1].position
    # The turn is over and the stream still answers a reader that comes back for it.
    again = [i async for i in _until_turn_end(engine.client, sid, -1)]
    assert again == whole
    await close_session(engine.client, sid, "done")


async def _until_turn_end(client, sid: str, after: int):
    async with aclosing(follow(client, sid, after=after)) as items:
        async for item in items:
            yield item
            if item.kind == "turn_ended":
                return


async def test_an_update_reader_past_the_cap_is_refused_with_a_typed_error(engine, scripted):
    scripted.set_script({"default": {"content": "hi"}})
    sid = session_id()
    await turn(engine, sid, "hello", tools=[])
    handle = engine.client.get_workflow_handle(sid)
    polls = [
        asyncio.ensure_future(
            handle.execute_update("__temporal_workflow_stream_poll", {"topics": ["progress"], "from_offset": 10**6})
        )
        for _ in range(4)
    ]
    done, _ = await asyncio.wait(polls, timeout=3, return_when=asyncio.FIRST_EXCEPTION)
    errors = [t.exception() for t in done]
    assert len(errors) == 1 and isinstance(errors[0], WorkflowUpdateFailedError)
    assert failure_of(errors[0]).type == "StreamReadersFullError"
    async with asyncio.timeout(10):
        await close_session(engine.client, sid, "done")  # releases the three that waited
        await asyncio.gather(*polls, return_exceptions=True)
