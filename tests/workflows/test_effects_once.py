"""Side effects once on every path: re-prompted programs, a Temporal reset, concurrent llm() under a budget.

Real dev server, real Monty, real HTTP to the scripted model; effects are
counted at the tool.
"""

from __future__ import annotations

import uuid

import pytest
from agent_support import make_spec
from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.contracts import (
    AgentInput,
    AgentResult,
    AgentSpec,
    LLMConfig,
    LLMRequest,
    Message,
)
from agentsteps.contracts.llm.tokens import prompt_tokens_upper_bound
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.examples.demo_tools import NotificationLedger
from agentsteps.worker import running_worker

MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=50, context_window=16_000)


class Charge(BaseModel):
    customer: str
    cents: int


class Receipt(BaseModel):
    receipt: int


def charging_registry(charges: list[tuple[str, str]]) -> ToolRegistry:
    """``charge`` takes a key but ignores it, as careless tools do: the engine alone must hold the line."""
    registry = ToolRegistry()

    @registry.tool(side_effects=True)
    def charge(args: Charge, ctx: ToolContext) -> Receipt:
        """Charge a customer."""
        charges.append((args.customer, ctx.idempotency_key))
        return Receipt(receipt=len(charges))

    return registry


def program(code: str) -> dict:
    return {"content": f"```python\n{code}```"}


async def _run(client, task_queue: str, spec: AgentSpec, text: str = "charge kim") -> AgentResult:
    return await client.execute_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=spec, input=text),
        id=f"eff-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )


async def test_a_reprompted_program_does_not_repeat_a_charge_and_is_told_it_took_effect(client, settings, scripted):
    charges: list[tuple[str, str]] = []
    scripted.set_script(
        {
            "replies": [
                program('r = await charge(customer="kim", cents=500)\nraise ValueError("then it broke")\n'),
                # Same call, arguments in another order: the same effect.
                program(
                    'r = await charge(cents=500, customer="kim")\nr2 = await charge(customer="ada", cents=100)\n'
                    '{"kim": r["receipt"], "ada": r2["receipt"]}\n'
                ),
            ]
        }
    )
    spec = AgentSpec(name="eff", model=MODEL, tools=["charge"], mode="code", max_steps=4, reprompt_budget=1)
    async with running_worker(client, settings, registry=charging_registry(charges)):
        result = await _run(client, settings.task_queue, spec)

    assert result.status == "completed"
    assert [c[0] for c in charges] == ["kim", "ada"], "kim was charged once, across the re-prompt"
    assert result.output == {"kim": 1, "ada": 2}, "the repeat was answered from the run's record"
    assert [e.tool for e in result.effects] == ["charge", "charge"]
    assert result.effects[0].key == charges[0][1]
    reprompt = scripted.requests[1].body["messages"][-1]["content"]
    assert "already took effect" in reprompt and 'charge({"cents":500,"customer":"kim"})' in reprompt
    assert '"receipt": 1' in reprompt


async def test_a_reset_past_a_side_effect_does_not_repeat_it(engine, scripted):
    scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {
                        "tool_calls": [
                            {"name": "send_notification", "arguments": {"recipient": "bob", "message": "hello"}}
                        ]
                    },
                },
                {"match": {"tool_result_for": "send_notification"}, "reply": {"content": "sent"}},
            ]
        }
    )
    client = engine.client
    handle = await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=make_spec(), input="tell bob"),
        id=f"reset-{uuid.uuid4().hex[:8]}",
        task_queue=engine.task_queue,
        result_type=AgentResult,
    )
    first = await handle.result()
    # Reset to the end of the first workflow task: every command after it (both model calls and the
    # notification) runs again in a new run.
    reset = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=handle.result_run_id),
            reason="test: reset past a side effect",
            workflow_task_finish_event_id=4,
            request_id=str(uuid.uuid4()),
        )
    )
    assert reset.run_id != handle.result_run_id
    second = await client.get_workflow_handle(handle.id, run_id=reset.run_id, result_type=AgentResult).result()

    assert first.output == second.output == "sent"
    delivered = NotificationLedger(engine.settings.state_dir / "notifications.db").delivered()
    assert len(delivered) == 1, f"the notification was delivered again after the reset: {delivered}"
    assert delivered[0][2] == 2, "the reset run did call the tool, with the same key"
    assert first.effects[0].key == second.effects[0].key == delivered[0][0]


CONCURRENT_LLM = """\
import asyncio
async def ask(i):
    try:
        return await llm(f"question {i}")
    except RuntimeError:
        return None
answers = await asyncio.gather(*[ask(i) for i in range(30)])
len([a for a in answers if a is not None])
"""


async def test_concurrent_llm_calls_reserve_prompt_and_max_tokens_so_the_budget_holds(client, settings, scripted):
    usage = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    scripted.set_script(
        {"replies": [{**program(CONCURRENT_LLM), "usage": usage}], "default": {"content": "an answer", "usage": usage}}
    )
    spec = AgentSpec(name="eff", model=MODEL, tools=[], mode="code", max_steps=2, token_budget=300)
    # After the program's own call (30 used), each llm() reserves a bound on its prompt plus
    # max_tokens, in launch order, until the next one would not fit what is left.
    left, fitting = spec.token_budget - 30, 0
    for i in range(30):
        reserve = prompt_tokens_upper_bound(LLMRequest(config=MODEL, messages=[Message.user(f"question {i}")]))
        if reserve + MODEL.max_tokens > left:
            break
        left -= reserve + MODEL.max_tokens
        fitting += 1
    async with running_worker(client, settings, registry=ToolRegistry()):
        result = await _run(client, settings.task_queue, spec)

    assert result.status == "completed"
    assert 0 < fitting < 30 and result.output == fitting
    assert len(scripted.requests) == 1 + fitting, "refused calls never reached the provider"
    assert result.usage.total_tokens == 30 * (1 + fitting) <= spec.token_budget


async def test_a_model_call_whose_prompt_would_overrun_the_budget_fails_typed_before_it_is_sent(
    client, settings, scripted
):
    scripted.set_script({"default": {"content": "never sent"}})
    spec = AgentSpec(name="eff", model=MODEL, tools=[], max_steps=2, token_budget=MODEL.max_tokens + 5)
    async with running_worker(client, settings, registry=ToolRegistry()):
        with pytest.raises(WorkflowFailureError) as failure:
            await _run(client, settings.task_queue, spec, text="a question " * 20)

    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "BudgetExceededError"
    assert "left in the run's token budget" in cause.message
    assert scripted.requests == [], "nothing reached the provider"
