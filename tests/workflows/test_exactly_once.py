"""Exactly once with no exceptions (issue 22): each path that repeated an effect, through the public surfaces.

Real dev server, real worker, real Monty, real HTTP to the scripted model, the
real ticket tracker over MCP; effects are counted at the tool. The stream
failures (item 7) are in test_provider_streaming.py and test_session_tokens.py,
the wire ids (item 8) in test_tool_names.py and test_tool_names_e2e.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from datetime import timedelta

import pytest
from approval_support import Refund, RefundArgs
from code_mode_support import connect_with_store
from mcp_support import free_port, http_tracker, make_client, new_token, seeded_db, stdio_tracker, tool_call
from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError, CancelledError
from test_effects_once import MODEL, Receipt, _run, program
from test_pipeline_workflow import REPLY, UPDATE, example_input, rules

from agentsteps.activities.mcp.source import McpToolSource
from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.client.runs import start_agent_run
from agentsteps.client.sessions import decide_approval, pending_approvals, send_turn, session_state
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, InvalidSpecError
from agentsteps.contracts.composition.pipeline_run import PipelineResult
from agentsteps.contracts.errors import NonRetryableProviderError
from agentsteps.contracts.names import AGENT_WORKFLOW, CANCEL_SIGNAL, PIPELINE_WORKFLOW
from agentsteps.examples.support_models import TicketState, TicketUpdate
from agentsteps.examples.tickets.db import TicketStore
from agentsteps.worker import running_worker


class Charge(BaseModel):
    customer: str
    amount: float


def charging_registry(charges: list[tuple[str, str]]) -> ToolRegistry:
    """``charge`` takes a key but ignores it, as careless tools do: the engine alone must hold the line."""
    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    def charge(args: Charge, ctx: ToolContext) -> Receipt:
        """Charge a customer."""
        charges.append((args.customer, ctx.idempotency_key))
        return Receipt(receipt=len(charges))

    return registry


# ------------------------------------------------------------------ 6. JSON-equal arguments, one key


async def test_json_equal_arguments_are_one_effect_whatever_their_spelling(client, settings, scripted):
    charges: list[tuple[str, str]] = []
    scripted.set_script(
        {
            "replies": [
                program('r = await charge(customer="kim", amount=500)\nraise ValueError("then it broke")\n'),
                # 500.0 and 5e2 are the JSON value 500: the same call, so the same effect.
                program(
                    'r = await charge(amount=500.0, customer="kim")\nr2 = await charge(customer="kim", amount=5e2)\n'
                    '[r["receipt"], r2["receipt"]]\n'
                ),
            ]
        }
    )
    spec = AgentSpec(name="once", model=MODEL, tools=["charge"], mode="code", max_steps=4, reprompt_budget=1)
    async with running_worker(client, settings, registry=charging_registry(charges)):
        result = await _run(client, settings.task_queue, spec)

    assert result.status == "completed", result
    # The first program's call is the effect; the re-prompted program's first repeat is answered from the
    # record, and its second (a second identical call in the same program) is a second, separate effect.
    assert [c[0] for c in charges] == ["kim", "kim"], charges
    assert result.output == [1, 2]
    assert len({k for _, k in charges}) == 2


# ------------------------------------------------------------------ 1. at most once means at most once


class Invoice(BaseModel):
    customer: str


def invoicing_registry(sent: list[str], first_call_seconds: float) -> ToolRegistry:
    """``send_invoice`` takes no key: at most once. Its first call is slow (it hangs past a shutdown's grace)."""
    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    async def send_invoice(args: Invoice) -> Receipt:
        """Send an invoice."""
        sent.append(args.customer)
        if len(sent) == 1:
            await asyncio.sleep(first_call_seconds)
        return Receipt(receipt=len(sent))

    return registry


INVOICE_SCRIPT = {
    "rules": [
        {
            "match": {"role": "user"},
            "reply": {"tool_calls": [{"name": "send_invoice", "arguments": {"customer": "kim"}}]},
        },
        {"match": {"tool_result_for": "send_invoice"}, "reply": {"content": "over"}},
    ]
}


async def _until(predicate, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out waiting")


async def test_a_call_cut_by_a_worker_shutdown_is_an_unknown_outcome_and_never_runs_again(client, settings, scripted):
    sent: list[str] = []
    registry = invoicing_registry(sent, first_call_seconds=30)
    scripted.set_script(INVOICE_SCRIPT)
    spec = AgentSpec(name="once", model=MODEL, tools=["send_invoice"], max_steps=3)
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="invoice kim"),
        id=f"once-{uuid.uuid4().hex[:8]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    # The tool outlives the first worker's grace period: the SDK reports the cut as a retryable
    # WorkerShutdown, which proves nothing about whether the invoice went out.
    async with running_worker(client, settings, registry=registry, graceful_shutdown_timeout=timedelta(seconds=0.5)):
        await _until(lambda: len(sent) == 1)
    async with running_worker(client, settings, registry=registry):
        result = await handle.result()

    assert sent == ["kim"], "the invoice was sent again after the shutdown"
    assert result.status == "completed"
    [call] = result.steps[0].tool_calls
    assert call.is_error and "ToolOutcomeUnknown" in call.content and "WorkerShutdown" in call.content
    assert [e.outcome for e in result.effects] == ["unknown"]
    told = scripted.requests[-1].body["messages"][-1]["content"]
    assert "may or may not have happened" in told


async def test_a_failure_after_the_tool_ran_is_an_unknown_outcome_and_never_runs_it_again(client, settings, scripted):
    sent: list[str] = []
    registry = ToolRegistry()

    class Opaque:
        """A value the tool returns that no payload converter can encode: the activity fails after the call."""

    @registry.tool(side_effects=True)
    def send_invoice(args: Invoice) -> dict:
        """Send an invoice."""
        sent.append(args.customer)
        return {"receipt": len(sent), "handle": Opaque()}

    scripted.set_script(INVOICE_SCRIPT)
    spec = AgentSpec(name="once", model=MODEL, tools=["send_invoice"], max_steps=3)
    async with running_worker(client, settings, registry=registry):
        result = await _run(client, settings.task_queue, spec, "invoice kim")

    assert sent == ["kim"], "the invoice was sent again after a failure that came after the call"
    [call] = result.steps[0].tool_calls
    assert call.is_error and "ToolOutcomeUnknown" in call.content
    assert [e.outcome for e in result.effects] == ["unknown"]


async def test_a_large_result_that_fails_to_upload_after_the_call_is_an_unknown_outcome(
    temporal_env, settings, scripted
):
    # A client (and so a worker) with the payload store, as deployed: results of 256 KiB or more go to it.
    client = await connect_with_store(temporal_env.client.service_client.config.target_host, settings)
    sent: list[str] = []
    store = settings.state_dir / "payloads" / "sha256"
    away = store.with_name("sha256.away")

    def restore() -> None:
        store.unlink()
        away.rename(store)

    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    def send_invoice(args: Invoice) -> dict:
        """Send an invoice (and return its 300 KB PDF, which goes to the payload store)."""
        sent.append(args.customer)
        if len(sent) == 1:
            # The store breaks for the upload of this result only: a file where its folder was.
            store.mkdir(parents=True, exist_ok=True)
            store.rename(away)
            store.write_text("not a folder")
            threading.Timer(1.0, restore).start()
        return {"receipt": len(sent), "pdf": "x" * 300_000}

    scripted.set_script(INVOICE_SCRIPT)
    spec = AgentSpec(name="once", model=MODEL, tools=["send_invoice"], max_steps=3, tool_result_chars=2000)
    async with running_worker(client, settings, registry=registry):
        result = await _run(client, settings.task_queue, spec, "invoice kim")

    assert sent == ["kim"], "the invoice was sent again after its result failed to upload"
    [call] = result.steps[0].tool_calls
    assert call.is_error and "ToolOutcomeUnknown" in call.content
    assert "payloads" not in call.content, "the store's error text (a path) is not told to the model"
    assert [e.outcome for e in result.effects] == ["unknown"]


@pytest.mark.parametrize(
    ("delivery", "error_type"), [("at_most_once", "ToolNotSentError"), ("retry", "McpUnavailableError")]
)
async def test_a_call_to_an_mcp_server_that_cannot_be_reached_was_not_sent_and_says_so(delivery, error_type):
    # The one failure an at-most-once call is retried after: the activity knows no request left the worker.
    mcp = make_client({"down": http_tracker(free_port(), tools=["add_comment"])}, {"TICKETS_API_TOKEN": new_token()})
    call = tool_call("add_comment", {"issue_id": "PROJ-1", "body": "hi", "author": "bot"})
    try:
        with pytest.raises(ApplicationError) as raised:
            await McpToolSource(mcp).call(call.model_copy(update={"delivery": delivery}))
    finally:
        await mcp.aclose()
    assert raised.value.type == error_type and not raised.value.non_retryable


def slow_ticket_registry(updates: list[str]) -> ToolRegistry:
    """``update_ticket`` without a key: at most once; it takes a few seconds."""
    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    async def update_ticket(update: TicketUpdate) -> TicketState:
        """Change a ticket's state."""
        updates.append(update.issue_id)
        await asyncio.sleep(3)
        return TicketState(issue_id=update.issue_id, state=update.state or "open", comment_count=1)

    return registry


async def test_a_workflow_cancel_during_an_at_most_once_call_cancels_the_run(client, settings, scripted):
    updates: list[str] = []
    pipeline = example_input()
    scripted.set_script(rules([{"json": UPDATE}], [{"json": REPLY}]))
    async with running_worker(client, settings, registry=slow_ticket_registry(updates)):
        handle = await client.start_workflow(
            PIPELINE_WORKFLOW,
            pipeline,
            id=f"once-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=PipelineResult,
        )
        await _until(lambda: len(updates) == 1)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    assert isinstance(failure.value.cause, CancelledError), failure.value.cause
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
    assert len(scripted.requests) == 1, "the cancel was swallowed as an outcome and the next step ran"
    assert updates == ["PROJ-1"]


# ------------------------------------------------------------------ 2. reset of a paused code-mode run


RESET_PROGRAM = (
    'r = await charge(customer="kim", amount=5)\n'
    'f = await refund(order="A-17", amount=40.0)\n'
    '[r["receipt"], f["refunded"]]\n'
)


def reset_registry(charged: list[str], refunded: list[str]) -> ToolRegistry:
    """Two keyed tools (one needs approval), each applying an effect once per key, as keyed tools must."""
    registry = ToolRegistry()
    receipts: dict[str, int] = {}

    @registry.tool(side_effects=True)
    def charge(args: Charge, ctx: ToolContext) -> Receipt:
        """Charge a customer."""
        charged.append(ctx.idempotency_key)
        return Receipt(receipt=receipts.setdefault(ctx.idempotency_key, len(receipts) + 1))

    @registry.tool(side_effects=True, requires_approval=True)
    def refund(args: RefundArgs, ctx: ToolContext) -> Refund:
        """Refund an order."""
        refunded.append(ctx.idempotency_key)
        return Refund(order=args.order, refunded=args.amount)

    return registry


async def _approve_until_done(client, handle) -> AgentResult:
    """The run's result, approving its refund whenever it waits for one."""
    for _ in range(600):
        description = await handle.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            return await handle.result()
        waiting = await pending_approvals(client, handle.id)
        for call in waiting:
            try:
                await decide_approval(client, handle.id, call.approval_id, approve=True, approver="ana")
            except Exception:  # noqa: BLE001 - decided meanwhile (a reapplied Update); the next look tells
                pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {handle.result_run_id} did not finish")


async def test_a_reset_to_any_workflow_task_of_a_paused_code_mode_run_completes_with_each_effect_once(
    client, settings, scripted
):
    charged: list[str] = []
    refunded: list[str] = []
    scripted.set_script({"default": program(RESET_PROGRAM)})
    spec = AgentSpec(name="once", model=MODEL, tools=["charge", "refund"], mode="code", max_steps=3)
    async with running_worker(client, settings, registry=reset_registry(charged, refunded)):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="charge and refund"),
            id=f"once-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        first = await _approve_until_done(client, handle)
        assert first.status == "completed" and first.output == [1, 40.0]
        tasks = [
            e.event_id
            async for e in handle.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        ]
        assert len(tasks) >= 4, "the program paused across several workflow tasks"
        for event_id in tasks:
            reset = await client.workflow_service.reset_workflow_execution(
                ResetWorkflowExecutionRequest(
                    namespace=client.namespace,
                    workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=handle.result_run_id),
                    reason=f"test: reset to workflow task {event_id}",
                    workflow_task_finish_event_id=event_id,
                    request_id=str(uuid.uuid4()),
                )
            )
            again = await _approve_until_done(
                client, client.get_workflow_handle(handle.id, run_id=reset.run_id, result_type=AgentResult)
            )
            assert again.status == "completed", f"reset to event {event_id}: {again}"
            assert again.output == first.output, f"reset to event {event_id}"
            assert [e.key for e in again.effects] == [e.key for e in first.effects], f"reset to event {event_id}"

    # Each effect has one key across the run and every reset of it: a keyed tool applied each once.
    assert len(set(charged)) == 1 and len(set(refunded)) == 1, (charged, refunded)


# ------------------------------------------------------------------ 5. a recorded effect is never asked for again


async def test_a_reprompted_program_repeating_an_approved_call_is_answered_from_the_record_not_asked_again(
    client, settings, scripted
):
    charged: list[str] = []
    refunded: list[str] = []
    scripted.set_script(
        {
            "replies": [
                program('f = await refund(order="A-17", amount=40.0)\nraise ValueError("then it broke")\n'),
                program('f = await refund(order="A-17", amount=40.0)\nf["refunded"]\n'),
            ]
        }
    )
    spec = AgentSpec(name="once", model=MODEL, tools=["refund"], mode="code", max_steps=4, reprompt_budget=1)
    asked: list[str] = []
    async with running_worker(client, settings, registry=reset_registry(charged, refunded)):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="refund A-17"),
            id=f"once-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            for call in await pending_approvals(client, handle.id):
                if call.approval_id not in asked:
                    asked.append(call.approval_id)
                    # The first request is approved; a second would be a person asked about a refund that
                    # already happened, and its rejection would tell the model it did not run.
                    await decide_approval(client, handle.id, call.approval_id, approve=len(asked) == 1)
            await asyncio.sleep(0.05)
        result = await handle.result()

    assert len(asked) == 1, f"the approver was asked again for a recorded effect: {asked}"
    assert refunded == [result.effects[0].key]
    assert result.status == "completed" and result.output == 40.0


# ------------------------------------------------------------------ 3. a failed turn's effects are not forgotten


@pytest.mark.parametrize("ending", ["failed", "cancelled"])
async def test_a_failed_or_cancelled_turns_effects_are_told_to_the_next_turn_and_shown_in_the_state(
    client, settings, scripted, ending
):
    charged: list[str] = []
    release = asyncio.Event()
    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    async def send_invoice(args: Invoice, ctx: ToolContext) -> Receipt:
        """Send an invoice."""
        charged.append(ctx.idempotency_key)
        await release.wait()  # the test cancels the turn while the invoice is out
        return Receipt(receipt=len(charged))

    scripted.set_script(
        {
            "rules": [
                {"match": {"contains": "again"}, "reply": {"content": "It was already sent in the last turn."}},
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "send_invoice", "arguments": {"customer": "kim"}}]},
                },
                # The turn then fails: the provider refuses the next call outright.
                {"match": {"tool_result_for": "send_invoice"}, "reply": {"fault": {"status": 400, "message": "no"}}},
            ]
        }
    )
    spec = AgentSpec(name="once", model=MODEL, tools=["send_invoice"], max_steps=3)
    sid = f"session-{uuid.uuid4().hex[:10]}"
    async with running_worker(client, settings, registry=registry):
        first = asyncio.ensure_future(
            send_turn(client, spec, "invoice kim", session_id=sid, task_queue=settings.task_queue)
        )
        await _until(lambda: len(charged) == 1)
        if ending == "cancelled":
            await client.get_workflow_handle(sid).signal(CANCEL_SIGNAL)
        release.set()
        if ending == "cancelled":
            assert (await first).status == "cancelled"
        else:
            with pytest.raises(NonRetryableProviderError):
                await first
        state = await session_state(client, sid)
        second = await send_turn(client, spec, "invoice kim again", session_id=sid, task_queue=settings.task_queue)
        after = await session_state(client, sid)

    assert charged == [charged[0]], "the invoice went out once"
    [untold] = state.untold_effects
    assert (untold.turn, untold.status) == (1, ending)
    assert [(e.tool, e.content) for e in untold.effects] == [("send_invoice", '{"receipt": 1}')]
    told = scripted.requests[-1].body["messages"][-1]["content"]
    assert "invoice kim again" in told and "took effect" in told
    assert 'send_invoice({"customer":"kim"}) returned: {"receipt": 1}' in told
    assert second.output == "It was already sent in the last turn."
    assert after.untold_effects == [], "the completed turn's conversation now holds them"


# ------------------------------------------------------------------ 4. the engine owns the idempotency key


def _tracker(tmp_path, monkeypatch, settings):
    token = new_token()
    monkeypatch.setenv("TICKETS_API_TOKEN", token)
    monkeypatch.setenv("TRACKER_EXPECTS", token)
    db = seeded_db(tmp_path, issues=3)
    config = tmp_path / "agentsteps.toml"
    table = stdio_tracker(db)
    lines = ["[mcp.servers.tracker]", *(f"{k} = {json.dumps(v)}" for k, v in table.items() if k != "env")]
    lines.append("env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table["env"].items()) + " }")
    config.write_text("\n".join(lines) + "\n")
    return db, settings.model_copy(update={"config_file": config})


REMINDER = {
    "rules": [
        # A model that picked its own key, as the reporter's did: it must not reach the server.
        {
            "match": {"role": "user"},
            "reply": {
                "tool_calls": [
                    {
                        "name": "add_comment",
                        "arguments": {
                            "issue_id": "PROJ-1",
                            "body": "Friendly reminder",
                            "author": "bot",
                            "idempotency_key": "reminder-001",
                        },
                    }
                ]
            },
        },
        {"match": {"tool_result_for": "add_comment"}, "reply": {"content": "reminded"}},
    ]
}


async def _remind(client, settings, **start) -> AgentResult:
    spec = AgentSpec(name="once", model=MODEL, tools=["add_comment"], max_steps=3)
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input="remind PROJ-1", **start),
        id=f"once-{uuid.uuid4().hex[:8]}",
        task_queue=settings.task_queue,
        result_type=AgentResult,
    )
    return await handle.result()


def _comments(db) -> list[str]:
    return [c.body for c in TicketStore(db).get_issue("PROJ-1").comments if c.body == "Friendly reminder"]


async def test_the_model_never_sees_nor_sets_an_idempotency_key_so_two_runs_are_two_effects(
    client, settings, scripted, tmp_path, monkeypatch
):
    db, own = _tracker(tmp_path, monkeypatch, settings)
    scripted.set_script(REMINDER)
    async with running_worker(client, own):
        first = await _remind(client, own)
        second = await _remind(client, own)

    offered = scripted.requests[0].body["tools"][0]["function"]["parameters"]
    assert "idempotency_key" not in offered["properties"] and "idempotency_key" not in offered.get("required", [])
    assert len(_comments(db)) == 2, "the second run's reminder was deduped against the first's by a model's key"
    assert first.effects[0].key != second.effects[0].key
    assert (
        json.loads(first.steps[0].tool_calls[0].content)["id"]
        != json.loads(second.steps[0].tool_calls[0].content)["id"]
    )


async def test_a_backend_key_scope_makes_two_runs_one_effect(client, settings, scripted, tmp_path, monkeypatch):
    db, own = _tracker(tmp_path, monkeypatch, settings)
    scripted.set_script(REMINDER)
    async with running_worker(client, own):
        first = await _remind(client, own, key_scope="order-42/reminder")
        second = await _remind(client, own, key_scope="order-42/reminder")
        other = await _remind(client, own, key_scope="order-43/reminder")

    assert first.effects[0].key == second.effects[0].key != other.effects[0].key
    assert len(_comments(db)) == 2, "one reminder per key scope"


async def test_sessions_sharing_a_key_scope_give_the_same_call_the_same_key(client, settings, scripted):
    charged: list[str] = []
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "charge", "arguments": {"customer": "kim", "amount": 5}}]},
                },
                {"match": {"tool_result_for": "charge"}, "reply": {"content": "charged"}},
            ]
        }
    )
    spec = AgentSpec(name="once", model=MODEL, tools=["charge"], max_steps=3)
    async with running_worker(client, settings, registry=charging_registry(charged)):
        for sid, scope in [("a", "order-42"), ("b", "order-42"), ("c", None)]:
            await send_turn(
                client,
                spec,
                "charge kim",
                session_id=f"session-{sid}-{uuid.uuid4().hex[:8]}",
                task_queue=settings.task_queue,
                key_scope=scope,
            )
        with pytest.raises(InvalidSpecError, match="key_scope"):
            await send_turn(
                client,
                spec,
                "charge kim",
                session_id=f"session-{uuid.uuid4().hex[:8]}",
                task_queue=settings.task_queue,
                key_scope="bad\x00scope",
            )

    keys = [key for _, key in charged]
    assert keys[0] == keys[1] != keys[2], "the scope, not the session, names the effect"


@pytest.mark.parametrize("scope", ["", "bad\nscope", "x" * 201])
async def test_a_malformed_key_scope_fails_the_run_typed_before_anything_runs(client, settings, scripted, scope):
    scripted.set_script({"default": {"content": "never asked"}})
    spec = AgentSpec(name="once", model=MODEL, tools=[], max_steps=2)
    async with running_worker(client, settings, registry=ToolRegistry()):
        with pytest.raises(WorkflowFailureError) as failure:
            await _run_input(client, settings, AgentInput(spec=spec, input="hi", key_scope=scope))
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidSpecError" and "key_scope" in cause.message
    assert scripted.requests == []
    with pytest.raises(InvalidSpecError, match="key_scope"):
        await start_agent_run(client, spec, "hi", task_queue=settings.task_queue, key_scope=scope)


async def _run_input(client, settings, inp: AgentInput) -> AgentResult:
    return await client.execute_workflow(
        AGENT_WORKFLOW, inp, id=f"once-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue, result_type=AgentResult
    )
