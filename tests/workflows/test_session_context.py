"""Context that outgrows the window: a session goes on past it with truncate and with summarize."""

from __future__ import annotations

import pytest
from agent_support import MODEL
from session_support import failure_of, session_id, turn
from temporalio.client import WorkflowUpdateFailedError

from agentsteps.client.sessions import continue_session, session_turns
from agentsteps.contracts import LLMConfig
from agentsteps.contracts.errors import AgentStepsError
from agentsteps.contracts.llm.context import SUMMARY_MARK

SMALL = LLMConfig(model=MODEL, max_tokens=64, context_window=700)
FILLER = "the quick brown fox jumps over the lazy dog " * 8


def fact(n: int) -> str:
    return f"fact {n}: ticket T-{n} belongs to team {n % 3}. {FILLER}"


async def _past_the_window(engine, policy: str, turns: int = 10):
    sid = session_id()
    await turn(engine, sid, fact(1), tools=[], model=SMALL, context_policy=policy)
    results = [await continue_session(engine.client, sid, fact(n)) for n in range(2, turns + 1)]
    return sid, results


@pytest.mark.parametrize("policy", ["truncate", "summarize"])
async def test_a_session_goes_on_past_its_window_and_the_precondition_holds_on_every_call(engine, scripted, policy):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"any_contains": "Summarize the conversation below"},
                    "reply": {"json": {"summary": "Earlier facts: ticket T-1 belongs to team 1."}},
                }
            ],
            "default": {"content": "noted"},
        }
    )

    sid, results = await _past_the_window(engine, policy)

    assert all(r.status == "completed" for r in results)
    actions = [s.context for r in results for s in r.steps if s.context is not None]
    assert actions and all(a.action == ("truncated" if policy == "truncate" else "summarized") for a in actions)
    main_calls = [r.body for r in scripted.requests if "Summarize the conversation below" not in str(r.body)]
    last = main_calls[-1]["messages"]
    # Every request sent fitted the window (the precondition checks each one), kept the system prompt
    # first and ended with the turn's question; the oldest turns are gone.
    assert last[0]["role"] == "system" and last[-1]["content"] == fact(10)
    assert all(fact(1) != m.get("content") for m in last)
    if policy == "summarize":
        assert SUMMARY_MARK in last[0]["content"] and "T-1 belongs to team 1" in last[0]["content"]
        summaries = [r for r in scripted.requests if "Summarize the conversation below" in str(r.body)]
        assert summaries and all(a.usage.total_tokens > 0 for a in actions)
    turns = await session_turns(engine.client, sid)
    assert [t.status for t in turns] == ["completed"] * 10


async def test_without_a_policy_the_turn_past_the_window_fails_typed_and_the_session_stays_open(engine, scripted):
    scripted.set_script({"default": {"content": "noted"}})
    sid = session_id()
    await turn(engine, sid, fact(1), tools=[], model=SMALL)
    failed = None
    for n in range(2, 10):
        try:
            await continue_session(engine.client, sid, fact(n))
        except AgentStepsError as exc:
            failed = failure_of(exc)
            break
    assert failed is not None and "context window" in failed.message
    turns = await session_turns(engine.client, sid)
    assert turns[-1].status == "failed"


async def test_a_summary_that_breaks_its_contract_falls_back_to_truncation(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {"match": {"any_contains": "Summarize the conversation below"}, "reply": {"content": "not json"}}
            ],
            "default": {"content": "noted"},
        }
    )
    _, results = await _past_the_window(engine, "summarize", turns=8)
    actions = [s.context for r in results for s in r.steps if s.context is not None]
    assert actions and all(a.action == "truncated" and "contract" in a.note for a in actions)
