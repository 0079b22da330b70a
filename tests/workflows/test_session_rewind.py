"""Rewinding a code-mode session three turns back: variables as they were, effects neither undone nor repeated.

Real dev server, worker, Monty and scripted model over HTTP; ``charge`` does
not dedupe, and every execution is counted at the tool.
"""

from __future__ import annotations

from agent_support import make_spec
from pydantic import BaseModel
from session_support import failure_of, session_id
from temporalio.client import WorkflowUpdateFailedError

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.client.sessions import continue_session, rewind_session, send_turn, session_state
from agentsteps.contracts.names import REWIND_UPDATE
from agentsteps.worker import running_worker


class Charge(BaseModel):
    customer: int


def charging_registry(executed: list[int]) -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    def charge(args: Charge, ctx: ToolContext) -> dict:
        """Charge a customer (ignores its idempotency key)."""
        executed.append(args.customer)
        return {"charged": args.customer}

    return registry


def program(code: str) -> dict:
    return {"content": f"```python\n{code}```"}


SCRIPT = {
    "rules": [
        {"match": {"contains": "set a"}, "reply": program("a = 'alpha'\na\n")},
        {"match": {"contains": "set b"}, "reply": program("b = 'beta'\nb\n")},
        {"match": {"contains": "charge seven"}, "reply": program("r = await charge(customer=7)\nr\n")},
        {"match": {"contains": "set c"}, "reply": program("c = 'gamma'\nc\n")},
        {"match": {"contains": "charge again"}, "reply": program("r2 = await charge(customer=7)\nr2\n")},
        {"match": {"contains": "show a"}, "reply": program("a\n")},
        {"match": {"contains": "set d"}, "reply": program("d = 'delta'\nd\n")},
    ]
}


async def test_rewind_three_turns_back_then_continue(client, settings, scripted):
    scripted.set_script(SCRIPT)
    executed: list[int] = []
    sid = session_id()
    spec = make_spec(mode="code", tools=["charge"])
    async with running_worker(client, settings, registry=charging_registry(executed)):
        first = await send_turn(client, spec, "set a", session_id=sid, task_queue=settings.task_queue)
        assert first.output == "alpha"
        for text in ("set b", "charge seven", "set c"):
            assert (await continue_session(client, sid, text)).status == "completed"
        assert executed == [7]
        before = {v.name for v in (await session_state(client, sid)).variables}
        assert {"a", "b", "r", "c"} <= before

        state = await rewind_session(client, sid, 1)  # three turns back: b, the charge and c are undone
        assert {v.name for v in state.variables} == {"a"}
        [rewind] = state.rewinds
        assert rewind.to_turn == 1 and [t.turn for t in rewind.undone] == [2, 3, 4]
        assert [(e.tool, e.arguments) for e in rewind.effects] == [("charge", '{"customer":7}')]

        again = await continue_session(client, sid, "charge again")
        assert again.turn == 5 and again.output == {"charged": 7}
        assert executed == [7], "the undone turn's charge ran again"
        told = scripted.requests[-1].body["messages"]
        assert "a rewind undid" in str(told) and "charge" in str(told)

        shown = await continue_session(client, sid, "show a")  # set before the rewind point
        assert shown.output == "alpha"
        await continue_session(client, sid, "set d")  # set after it
        names = {v.name for v in (await session_state(client, sid)).variables}
        assert {"a", "r2", "d"} <= names and not names & {"b", "c", "r"}


async def test_a_rewind_to_a_turn_the_session_cannot_reach_is_refused(client, settings, scripted):
    scripted.set_script(SCRIPT)
    sid = session_id()
    async with running_worker(client, settings, registry=charging_registry([])):
        await send_turn(
            client, make_spec(mode="code", tools=["charge"]), "set a", session_id=sid, task_queue=settings.task_queue
        )
        await continue_session(client, sid, "set b")
        await rewind_session(client, sid, 0)
        for bad in ({"to_turn": 2}, {"to_turn": -1}, {"to_turn": "x"}, {"turn": 1}, "garbage"):
            try:
                await client.get_workflow_handle(sid).execute_update(REWIND_UPDATE, bad)
            except WorkflowUpdateFailedError as exc:
                assert failure_of(exc).type == "InvalidTurnError", bad
            else:
                raise AssertionError(f"rewind {bad!r} was accepted")
        state = await session_state(client, sid)
        assert state.variables == [] and len(state.rewinds) == 1


async def test_the_cli_rewinds_a_session_and_refuses_an_unreachable_turn(client, settings, scripted):
    import io

    from agentsteps.cli.chat import session_command

    scripted.set_script(SCRIPT)
    sid = session_id()
    on_this_server = settings.model_copy(update={"temporal_address": client.service_client.config.target_host})
    async with running_worker(client, settings, registry=charging_registry([])):
        await send_turn(
            client, make_spec(mode="code", tools=["charge"]), "set a", session_id=sid, task_queue=settings.task_queue
        )
        await continue_session(client, sid, "set b")
        out = io.StringIO()
        assert await session_command(on_this_server, "rewind", sid, "", out, to_turn=1) == 0
        assert f"session {sid} rewound to turn 1; undone turns: #2" in out.getvalue()
        assert await session_command(on_this_server, "rewind", sid, "", io.StringIO(), to_turn=2) == 2
        assert await session_command(on_this_server, "rewind", sid, "", io.StringIO(), to_turn=None) == 2
