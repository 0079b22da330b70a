"""A fork of a source that is inside a call with side effects never makes that call again.

Real dev server, worker and scripted model over HTTP. The source's ``charge``
blocks until the test releases it, and every execution is counted at the tool:
the charge happens exactly once across the source and its fork, and the fork
sees either the source's real outcome (it waited for the call to settle) or an
explicit unknown (it did not).
"""

from __future__ import annotations

import asyncio

from agent_support import make_spec
from pydantic import BaseModel
from session_support import session_id

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.client.forks import fork_run
from agentsteps.client.session_forks import fork_session
from agentsteps.client.sessions import continue_session, send_turn
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.llm.tools import OUTCOME_UNKNOWN
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import build_data_converter, running_worker


class Charge(BaseModel):
    customer: int


class BlockingCharge:
    """``charge`` that enters, then waits for ``release`` before it answers; each execution counted."""

    def __init__(self) -> None:
        self.executed: list[int] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def registry(self) -> ToolRegistry:
        registry = ToolRegistry()

        @registry.tool(side_effects=True)
        async def charge(args: Charge, ctx: ToolContext) -> dict:
            """Charge a customer (ignores its idempotency key, as careless tools do)."""
            self.executed.append(args.customer)
            self.entered.set()
            await self.release.wait()
            return {"charged": args.customer}

        return registry


SCRIPT = {
    "rules": [
        {"match": {"role": "user"}, "reply": {"tool_calls": [{"name": "charge", "arguments": {"customer": 7}}]}},
        {"match": {"role": "tool", "contains": '"charged": 7'}, "reply": {"content": "charged"}},
        {"match": {"role": "tool", "contains": OUTCOME_UNKNOWN}, "reply": {"content": "not sure it was charged"}},
    ]
}


async def _blocked_source(client, settings, tool: BlockingCharge) -> str:
    source = f"running-{settings.task_queue}"
    await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=make_spec(tools=["charge"]), input="charge customer 7"),
        id=source,
        task_queue=settings.task_queue,
    )
    await asyncio.wait_for(tool.entered.wait(), 30)
    return source


async def test_a_fork_of_a_source_inside_a_charge_is_told_the_outcome_is_unknown(client, settings, scripted):
    scripted.set_script(SCRIPT)
    tool = BlockingCharge()
    async with running_worker(client, settings, registry=tool.registry()):
        source = await _blocked_source(client, settings, tool)
        # The source has recorded no step yet: the fork starts before its model step 0, and its model asks
        # for the same charge, which is answered as unknown instead of being sent under the fork's key.
        handle = await fork_run(
            client,
            source,
            0,
            data_converter=build_data_converter(settings),
            task_queue=settings.task_queue,
            settle_seconds=0.5,
        )
        # Bounded: a fork that sent the charge again would block on it as the source does.
        fork = await asyncio.wait_for(handle.result(), 30)
        assert fork.output == "not sure it was charged"
        [call] = [c for s in fork.steps for c in s.tool_calls]
        assert call.name == "charge" and OUTCOME_UNKNOWN in call.content and f"run {source}" in call.content
        assert fork.effects == [] and tool.executed == [7]
        # Its model was told first, in its system prompt, that the charge may or may not have happened.
        told = [r for r in scripted.requests if "which this run is a fork of" in str(r.body)]
        assert told and "outcome unknown: it may or may not have happened" in str(told[0].body)
        tool.release.set()
        done = await client.get_workflow_handle(source, result_type=AgentResult).result()
    assert done.output == "charged"
    assert tool.executed == [7], "the charge happened more than once across the source and its fork"


async def test_a_fork_of_a_source_inside_a_charge_waits_for_its_real_outcome(client, settings, scripted):
    scripted.set_script(SCRIPT)
    tool = BlockingCharge()
    async with running_worker(client, settings, registry=tool.registry()):
        source = await _blocked_source(client, settings, tool)
        # At step 1, after the charge: the source has no such step until its call settles, so the fork waits.
        forking = asyncio.ensure_future(
            fork_run(
                client,
                source,
                1,
                data_converter=build_data_converter(settings),
                task_queue=settings.task_queue,
                settle_seconds=60,
            )
        )
        await asyncio.sleep(1.0)
        assert not forking.done(), "the fork did not wait for the call the source is making"
        tool.release.set()
        fork = await (await asyncio.wait_for(forking, 30)).result()
        done = await client.get_workflow_handle(source, result_type=AgentResult).result()
    assert done.output == "charged" and fork.output == "charged"
    # The fork went on from the source's real outcome, and made no call.
    assert [c for s in fork.steps for c in s.tool_calls] == []
    first = [r for r in scripted.requests if "which this run is a fork of" in str(r.body)][0]
    assert '"charged": 7' in str(first.body)
    assert tool.executed == [7], "the charge happened more than once across the source and its fork"


SESSION_SCRIPT = {
    "rules": [
        {"match": {"role": "user", "contains": "hello"}, "reply": {"content": "hi there"}},
        *SCRIPT["rules"],
    ]
}


async def test_a_fork_of_a_session_turn_while_the_next_turn_is_inside_a_charge_repeats_no_effect(
    client, settings, scripted
):
    scripted.set_script(SESSION_SCRIPT)
    tool = BlockingCharge()
    sid = session_id()
    async with running_worker(client, settings, registry=tool.registry()):
        await send_turn(client, make_spec(tools=["charge"]), "hello", session_id=sid, task_queue=settings.task_queue)
        # Turn 2 charges and blocks inside the call: nothing of it is in the session's checkpoints yet.
        second = asyncio.ensure_future(continue_session(client, sid, "charge customer 7"))
        await asyncio.wait_for(tool.entered.wait(), 30)
        # Turn 1 forked with another input that asks for the same charge: unknown, never sent again.
        _, first = await asyncio.wait_for(
            fork_session(
                client,
                sid,
                1,
                0,
                data_converter=build_data_converter(settings),
                task_queue=settings.task_queue,
                user_input="charge customer 7",
                settle_seconds=0.5,
            ),
            30,
        )
        assert first.output == "not sure it was charged" and tool.executed == [7]
        [call] = [c for s in first.steps for c in s.tool_calls]
        assert OUTCOME_UNKNOWN in call.content and f"run {sid}" in call.content
        tool.release.set()
        assert (await asyncio.wait_for(second, 30)).output == "charged"
    assert tool.executed == [7], "the charge happened more than once across the session and its fork"
