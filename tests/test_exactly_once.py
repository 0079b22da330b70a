"""Exactly once with no exceptions (issue 22): each path that repeated an effect, through the public surfaces.

Real dev server, real worker, real Monty, real HTTP to the scripted model;
effects are counted at the tool.
"""

from __future__ import annotations

import uuid

from agentsteps.activities.tool_registry import ToolContext, ToolRegistry
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker
from pydantic import BaseModel

MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=50, context_window=16_000)


class Charge(BaseModel):
    customer: str
    amount: float


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
        AGENT_WORKFLOW, AgentInput(spec=spec, input=text), id=f"once-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue, result_type=AgentResult,
    )


# ------------------------------------------------------------------ 6. JSON-equal arguments, one key


async def test_json_equal_arguments_are_one_effect_whatever_their_spelling(client, settings, scripted):
    charges: list[tuple[str, str]] = []
    scripted.set_script({"replies": [
        program('r = await charge(customer="kim", amount=500)\nraise ValueError("then it broke")\n'),
        # 500.0 and 5e2 are the JSON value 500: the same call, so the same effect.
        program('r = await charge(amount=500.0, customer="kim")\nr2 = await charge(customer="kim", amount=5e2)\n'
                '[r["receipt"], r2["receipt"]]\n'),
    ]})
    spec = AgentSpec(name="once", model=MODEL, tools=["charge"], mode="code", max_steps=4, reprompt_budget=1)
    async with running_worker(client, settings, registry=charging_registry(charges)):
        result = await _run(client, settings.task_queue, spec)

    assert result.status == "completed", result
    # The first program's call is the effect; the re-prompted program's first repeat is answered from the
    # record, and its second (a second identical call in the same program) is a second, separate effect.
    assert [c[0] for c in charges] == ["kim", "kim"], charges
    assert result.output == [1, 2]
    assert len({k for _, k in charges}) == 2
