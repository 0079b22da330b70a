"""The Python client raises the types docs/failures.md names, caught with ``except <Type>`` (real dev server).

Before: a busy session's turn raised ``WorkflowUpdateFailedError`` (the ``SessionBusyError`` only in
``__cause__``), a turn to a closing session missed ``except SessionClosedError``, ``close_session`` on an
id that never existed said the session "has ended", and ``session_state`` on it raised a raw ``RPCError``.
A refused Update says it is not retryable (the ``temporal`` CLI showed ``retryable: true``).
"""

from __future__ import annotations

import asyncio
import uuid

from agent_support import make_spec
from session_support import session_id, turn
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from agentsteps.client.forks import fork_run
from agentsteps.client.runs import follow, start_agent_run
from agentsteps.client.session_forks import fork_session
from agentsteps.client.sessions import (
    close_session,
    continue_session,
    decide_approval,
    pending_approvals,
    rewind_session,
    send_turn,
    session_state,
    session_turns,
)
from agentsteps.contracts.errors import (
    ApprovalError,
    BudgetExceededError,
    InvalidSpecError,
    InvalidTurnError,
    RunNotFoundError,
    SessionBusyError,
    SessionClosedError,
    SessionNotFoundError,
)


def caught(call, error_type):
    """Await ``call`` and return the error ``except error_type`` caught (fails if it raised anything else)."""

    async def run():
        try:
            await call
        except error_type as exc:
            return exc
        raise AssertionError(f"expected {error_type.__name__}")

    return run()


def refusal(exc: BaseException) -> ApplicationError:
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    assert isinstance(cause, ApplicationError)
    return cause


async def test_a_busy_session_a_closing_one_and_a_bad_turn_are_caught_by_their_documented_types(engine, scripted):
    scripted.set_script({"default": {"content": "slow answer", "delay_seconds": 1.5}})
    sid = session_id()
    first = asyncio.ensure_future(turn(engine, sid, "first"))
    await asyncio.sleep(0.7)

    busy = await caught(turn(engine, sid, "second"), SessionBusyError)
    closing = asyncio.ensure_future(close_session(engine.client, sid, "resolved"))
    await asyncio.sleep(0.3)
    late = await caught(turn(engine, sid, "one more"), SessionClosedError)
    assert (await first).output == "slow answer" and (await closing).turns == 1

    assert "turn 1 is still running" in str(busy) and "closed" in str(late)
    # Refused Updates are not retryable on the wire either.
    assert refusal(busy).non_retryable and refusal(late).non_retryable
    ended = await caught(close_session(engine.client, sid), SessionClosedError)
    assert "has ended (resolved)" in str(ended)


async def test_an_id_that_never_existed_is_not_found_not_closed(engine):
    never = f"session-never-{uuid.uuid4().hex[:8]}"
    client = engine.client
    for call in (
        close_session(client, never),
        session_state(client, never),
        session_turns(client, never),
        continue_session(client, never, "hello"),
        rewind_session(client, never, 0),
        fork_session(client, never, 1, 0, data_converter=pydantic_data_converter, task_queue=engine.task_queue),
    ):
        error = await caught(call, SessionNotFoundError)
        assert never in str(error) and "has ended" not in str(error)
    for call in (
        decide_approval(client, never, "a-1", approve=True),
        pending_approvals(client, never),
    ):
        assert never in str(await caught(call, RunNotFoundError))


async def test_an_unknown_approval_an_empty_turn_and_a_spent_budget_are_caught_by_their_types(engine, scripted):
    scripted.set_script({"default": {"content": "x " * 50}})
    sid = session_id()
    await turn(engine, sid, "hello", tools=[])
    refused = await caught(decide_approval(engine.client, sid, "no-such-call", approve=True), ApprovalError)
    assert "no call is waiting" in str(refused) and refusal(refused).non_retryable
    empty = await caught(continue_session(engine.client, sid, "   "), InvalidTurnError)
    assert "empty" in str(empty) and refusal(empty).non_retryable

    spent = await caught(turn(engine, session_id(), "again", tools=[], token_budget=10), BudgetExceededError)
    assert "budget" in str(spent)
    handle = await start_agent_run(
        engine.client, make_spec(tools=[], token_budget=10), "go", task_queue=engine.task_queue
    )
    assert "budget" in str(await caught(follow(handle, lambda step: None), BudgetExceededError))


async def test_forking_a_session_as_a_run_or_a_run_as_a_session_names_the_right_command(engine, scripted):
    scripted.set_script({"default": {"content": "ok"}})
    sid = session_id()
    await send_turn(engine.client, make_spec(tools=[]), "hi", session_id=sid, task_queue=engine.task_queue)
    as_run = await caught(
        fork_run(engine.client, sid, 0, data_converter=pydantic_data_converter, task_queue=engine.task_queue),
        InvalidSpecError,
    )
    assert f"{sid} is a session" in str(as_run) and "--turn T" in str(as_run)
    run = await start_agent_run(engine.client, make_spec(tools=[]), "go", task_queue=engine.task_queue)
    await run.result()
    as_session = await caught(
        fork_session(engine.client, run.id, 1, 0, data_converter=pydantic_data_converter, task_queue=engine.task_queue),
        InvalidSpecError,
    )
    assert "not a session" in str(as_session) and "without --turn" in str(as_session)
