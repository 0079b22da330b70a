"""SessionWorkflow end to end: turns by update-with-start, queries, close, idle timeout, bad turns."""

from __future__ import annotations

import asyncio

import pytest
from agent_support import make_spec, run_agent
from session_support import failure_of, memory_script, rejected, session_id, turn
from temporalio.client import WorkflowUpdateFailedError

from agentsteps.client.sessions import close_session, continue_session, session_handle, session_state, session_turns
from agentsteps.contracts.errors import BudgetExceededError
from agentsteps.contracts.names import CANCEL_SIGNAL, TURN_UPDATE
from agentsteps.contracts.session import MAX_TURN_INPUT_CHARS, SessionConfig, SessionOutcome


async def test_second_turn_sees_the_first_turns_conversation_and_queries_report_both(engine, scripted):
    scripted.set_script(memory_script())
    sid = session_id()

    first = await turn(engine, sid, "weather in Lisbon?")
    second = await turn(engine, sid, "what did I ask before?")

    assert (first.session_id, first.turn, first.status, first.output) == (sid, 1, "completed", "Lisbon is sunny")
    assert [s.kind for s in first.steps] == ["tool_call", "final"]
    assert (second.turn, second.output) == (2, "about Lisbon")
    # Turn 2's request carried turn 1 whole: system, user, assistant+tool call, tool, answer, new user.
    roles = [m["role"] for m in scripted.requests[-1].body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]

    state = await session_state(engine.client, sid)
    assert (state.status, state.turns, state.current_turn) == ("idle", 2, None)
    assert state.usage.total_tokens == first.usage.total_tokens + second.usage.total_tokens > 0
    assert state.idle_timeout_seconds == 7 * 86_400
    turns = await session_turns(engine.client, sid)
    assert [(t.turn, t.status, t.input, t.output) for t in turns] == [
        (1, "completed", "weather in Lisbon?", "Lisbon is sunny"),
        (2, "completed", "what did I ask before?", "about Lisbon"),
    ]


async def test_close_ends_the_session_and_later_turns_are_rejected_as_closed(engine, scripted):
    scripted.set_script({"default": {"content": "ok"}})
    sid = session_id()
    await turn(engine, sid, "hello")

    closed = await close_session(engine.client, sid, "ticket resolved")

    assert (closed.status, closed.closed_reason, closed.turns) == ("closed", "ticket resolved", 1)
    outcome = await session_handle(engine.client, sid).result()
    assert (outcome.reason, outcome.turns) == ("ticket resolved", 1)
    # The workflow has ended: the id cannot take an update any more.
    with pytest.raises(Exception):
        await session_handle(engine.client, sid).execute_update(TURN_UPDATE, {"input": "again"})


async def test_close_twice_and_turn_after_close_get_session_closed_errors(engine, scripted):
    scripted.set_script({"default": {"content": "ok", "delay_seconds": 1.5}})
    sid = session_id()
    await turn(engine, sid, "hello")
    running = asyncio.ensure_future(continue_session(engine.client, sid, "slow"))
    await asyncio.sleep(0.5)
    closing = asyncio.ensure_future(close_session(engine.client, sid))
    await asyncio.sleep(0.3)

    again = await rejected(engine.client, sid, "close", {"reason": "twice"})
    late = await rejected(engine.client, sid, TURN_UPDATE, {"input": "one more"})

    assert again.type == "SessionClosedError" and "already closed" in again.message
    assert late.type == "SessionClosedError" and "closed" in late.message
    # The running turn still finished, and close waited for it.
    assert (await running).output == "ok"
    assert (await closing).turns == 2


async def test_a_turn_while_another_runs_is_rejected_busy_and_the_running_turn_is_unharmed(engine, scripted):
    scripted.set_script({"default": {"content": "slow answer", "delay_seconds": 1.5}})
    sid = session_id()
    first = asyncio.ensure_future(turn(engine, sid, "first"))
    await asyncio.sleep(0.7)

    busy = await rejected(engine.client, sid, TURN_UPDATE, {"input": "second"})

    assert busy.type == "SessionBusyError" and "turn 1 is still running" in busy.message
    assert (await first).output == "slow answer"
    assert (await session_state(engine.client, sid)).turns == 1


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ({"input": ""}, "empty"),
        ({"input": "   \n\t "}, "empty"),
        ({"input": "x" * (MAX_TURN_INPUT_CHARS + 1)}, f"at most {MAX_TURN_INPUT_CHARS}"),
        ({"input": "ok\x00\x01\x02\xff garbage"}, "U+0000"),
        ({"input": 42}, "$.input: Input should be a valid string"),
        ({"input": ["a", "b"]}, "$.input: Input should be a valid string"),
        ({"text": "wrong field"}, "$.input: Field required"),
        ("a bare string", "got str"),
        (None, "got NoneType"),
    ],
)
async def test_hostile_turn_input_is_rejected_before_history_with_a_clear_message(engine, scripted, arg, expected):
    scripted.set_script({"default": {"content": "fine"}})
    sid = session_id()
    await turn(engine, sid, "hello")
    events_before = await _update_events(engine.client, sid)

    refused = await rejected(engine.client, sid, TURN_UPDATE, arg)

    assert refused.type == "InvalidTurnError"
    assert expected in refused.message
    # A rejected update leaves no trace in history, and the session goes on.
    assert await _update_events(engine.client, sid) == events_before
    assert (await turn(engine, sid, "still there?")).turn == 2


async def test_a_failed_turn_leaves_the_conversation_as_it_was_and_the_session_open(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"contains": "loop"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
                },
                {
                    "match": {"tool_result_for": "get_weather"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
                },
            ],
            "default": {"content": "fine"},
        }
    )
    sid = session_id()
    await turn(engine, sid, "hello", max_steps=2)

    with pytest.raises(BudgetExceededError) as failed:
        await turn(engine, sid, "loop forever", max_steps=2)
    after = await turn(engine, sid, "and now?", max_steps=2)

    assert failure_of(failed.value).type == "BudgetExceededError"
    assert after.turn == 3 and after.output == "fine"
    # The failed turn's messages were dropped: no dangling tool calls in turn 3's request.
    roles = [m["role"] for m in scripted.requests[-1].body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    turns = await session_turns(engine.client, sid)
    assert [t.status for t in turns] == ["completed", "failed", "completed"]
    assert "BudgetExceededError" in turns[1].output or "steps" in turns[1].output


async def test_an_idle_session_closes_itself_after_its_idle_timeout(engine, scripted):
    scripted.set_script({"default": {"content": "ok"}})
    sid = session_id()
    await turn(engine, sid, "hello", config=SessionConfig(idle_timeout_seconds=1.5))

    outcome = await asyncio.wait_for(session_handle(engine.client, sid).result(), timeout=20)

    assert isinstance(outcome, SessionOutcome)
    assert (outcome.reason, outcome.turns) == ("idle_timeout", 1)


async def test_cancel_stops_the_running_turn_and_the_session_stays_open(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"contains": "slow"},
                    "reply": {
                        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}],
                        "delay_seconds": 1.0,
                    },
                }
            ],
            "default": {"content": "ok"},
        }
    )
    sid = session_id()
    await turn(engine, sid, "hello")
    running = asyncio.ensure_future(turn(engine, sid, "slow one"))
    await asyncio.sleep(0.5)
    await session_handle(engine.client, sid).signal(CANCEL_SIGNAL)

    cancelled = await running

    assert cancelled.status == "cancelled"
    assert (await turn(engine, sid, "next")).turn == 3


async def test_agent_workflow_still_runs_the_same_one_shot_loop(engine, scripted):
    scripted.set_script(memory_script())
    result = await run_agent(engine.client, engine.task_queue, make_spec(tools=["get_weather"]), "weather in Lisbon?")
    assert (result.status, result.output) == ("completed", "Lisbon is sunny")
    assert [m["role"] for m in scripted.requests[0].body["messages"]] == ["system", "user"]


async def _update_events(client, sid: str) -> int:
    history = await client.get_workflow_handle(sid).fetch_history()
    return sum(1 for e in history.events if "UPDATE" in e.WhichOneof("attributes").upper())


async def test_the_same_side_effect_asked_in_two_turns_runs_twice_once_per_turn(engine, scripted):
    from agentsteps.examples.demo_tools import NotificationLedger

    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "tool_calls": [
                            {"name": "send_notification", "arguments": {"recipient": "carol", "message": "standup"}}
                        ]
                    },
                },
                {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "sent"}},
            ]
        }
    )
    sid = session_id()
    await turn(engine, sid, "remind carol", tools=["send_notification"])
    await turn(engine, sid, "remind carol again", tools=["send_notification"])
    delivered = NotificationLedger(engine.settings.state_dir / "notifications.db").delivered()
    # Effect keys are scoped by turn: turn 2's equal call is a new effect, not a repeat of turn 1's.
    assert [recipient for _, recipient, _ in delivered] == ["carol", "carol"]
