"""Delivery policies: retry, key, at_most_once; and example tools that dedupe on their key.

The end-to-end cases run an agent against a real MCP server (stdio) whose tool
dies mid-call the first time, and count the calls on the server's side.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import mcp_types as types
import pytest
from mcp_support import hostile, make_client
from pydantic import BaseModel

from agentsteps.activities.mcp.results import delivery_of
from agentsteps.activities.mcp.source import McpToolSource
from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.config.mcp_config import parse_mcp_config
from agentsteps.contracts.mcp import McpConfigError
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.examples.support_models import TicketUpdate
from agentsteps.examples.support_tools import build_registry as support_registry
from agentsteps.worker import running_worker

MODEL = LLMConfig(model="scripted-2026-01-01", max_tokens=256, context_window=16_000)


class Args(BaseModel):
    text: str


def test_python_tools_declare_their_delivery_and_a_key_needs_a_context():
    registry = ToolRegistry()

    @registry.tool()
    def lookup(args: Args) -> Args: ...

    @registry.tool(side_effects=True)
    def keyed(args: Args, ctx: ToolContext) -> Args: ...

    @registry.tool(side_effects=True)
    def blind(args: Args) -> Args: ...

    @registry.tool(side_effects=True, delivery="retry")
    def upsert(args: Args) -> Args: ...

    schemas = registry.schemas()
    assert {n: s.delivery for n, s in schemas.items()} == {
        "lookup": "retry",
        "keyed": "key",
        "blind": "at_most_once",
        "upsert": "retry",
    }
    with pytest.raises(TypeError, match="ToolContext"):
        registry.tool(name="nokey", side_effects=True, delivery="key")(blind)
    with pytest.raises(TypeError, match="delivery must be"):
        registry.tool(name="odd", delivery="sometimes")(blind)  # type: ignore[arg-type]


def test_mcp_delivery_follows_annotations_then_the_key_parameter_then_the_config():
    def tool(annotations=None, key=False) -> types.Tool:
        props = {"idempotency_key": {"type": "string"}} if key else {}
        return types.Tool(name="t", input_schema={"type": "object", "properties": props}, annotations=annotations)

    assert delivery_of(tool(types.ToolAnnotations(read_only_hint=True))) == "retry"
    assert delivery_of(tool(types.ToolAnnotations(idempotent_hint=True))) == "retry"
    assert delivery_of(tool(key=True)) == "key"
    assert delivery_of(tool()) == "at_most_once"
    assert delivery_of(tool(), "retry") == "retry"


@pytest.mark.parametrize("bad", [{"charge": "sometimes"}, {"": "retry"}, ["charge"], {"charge": 3}])
def test_a_bad_delivery_override_in_the_config_is_a_typed_error(bad):
    with pytest.raises(McpConfigError) as info:
        parse_mcp_config({"mcp": {"servers": {"rogue": hostile(delivery=bad)}}})
    assert "delivery" in str(info.value)


def test_update_ticket_applies_each_idempotency_key_once():
    tool = support_registry().get("update_ticket")
    assert tool is not None and tool.schema().delivery == "key"
    update = TicketUpdate(issue_id="PROJ-2", state="closed", comment="done")
    first = tool.fn(update, ToolContext(call_id="a", idempotency_key="k1"))
    again = tool.fn(update, ToolContext(call_id="b", idempotency_key="k1"))
    other = tool.fn(update, ToolContext(call_id="c", idempotency_key="k2"))
    assert first == again and first.comment_count == 3
    assert other.comment_count == 4, "a new key is a new effect"


def _script(tool: str) -> dict:
    return {
        "rules": [
            {"match": {"role": "user"}, "reply": {"tool_calls": [{"name": tool, "arguments": {"cents": 500}}]}},
            {"match": {"tool_result_for": tool}, "reply": {"content": "over"}},
        ]
    }


@pytest.mark.parametrize(
    ("tool", "override", "calls", "unknown"),
    [
        ("charge_dies_once", None, 1, True),  # no key, no hint: at most once, the model is told
        ("read_dies_once", None, 2, False),  # readOnlyHint: retried, the model gets the answer
        ("charge_dies_once", {"charge_dies_once": "retry"}, 2, False),  # the operator says it is safe to retry
    ],
)
async def test_an_mcp_server_dying_mid_call(client, settings, scripted, tmp_path: Path, tool, override, calls, unknown):
    ledger = tmp_path / "ledger"
    server = hostile(env={"HOSTILE_LEDGER": str(ledger), "HOSTILE_MARKER": str(tmp_path / "m")})
    if override:
        server["delivery"] = override
    mcp = make_client({"rogue": server}, {})
    scripted.set_script(_script(tool))
    spec = AgentSpec(name="deliv", model=MODEL, tools=[tool], max_steps=3)
    try:
        async with running_worker(client, settings, registry=ToolRegistry(), sources=[McpToolSource(mcp)]):
            result = await client.execute_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=spec, input="charge"),
                id=f"deliv-{uuid.uuid4().hex[:8]}",
                task_queue=settings.task_queue,
                result_type=AgentResult,
            )
    finally:
        await mcp.aclose()

    assert result.status == "completed"
    assert Path(f"{ledger}.{tool}").read_text().count("\n") == calls, "calls counted at the server"
    seen = result.steps[0].tool_calls[0]
    tool_message = scripted.requests[1].body["messages"][-1]["content"]
    if unknown:
        assert seen.is_error and "ToolOutcomeUnknown" in seen.content and "may or may not have happened" in tool_message
        assert [e.outcome for e in result.effects] == ["unknown"]
    else:
        assert not seen.is_error and '"call": 2' in seen.content
