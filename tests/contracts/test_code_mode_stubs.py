"""Stub generation from tool schemas, checked by Monty's bundled type checker."""

from __future__ import annotations

import pytest
import pytest_asyncio

from agentsteps.activities.sandbox import SandboxPool, check_program
from agentsteps.contracts import ToolSchema
from agentsteps.contracts.code.program import capped_view
from agentsteps.contracts.code.stubs import extract_program, generate_stubs, program_functions, python_name
from agentsteps.contracts.violations import ViolationKind

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

TICKETS = ToolSchema(
    name="tickets.search",
    description="Search tickets.",
    parameters={
        "type": "object",
        "properties": {
            "limit": {"type": "integer"},
            "status": {"type": "string", "enum": ["open", "closed"]},
        },
        "required": ["status"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "tickets": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "due": {"type": ["string", "null"]},
                        "x-priority": {"type": "number"},
                    },
                    "required": ["id"],
                },
            }
        },
        "required": ["tickets"],
    },
)
NOTE = ToolSchema(name="add-note", parameters={"type": "object", "properties": {"text": {"type": "string"}}})


@pytest_asyncio.fixture(scope="module")
async def pool():
    p = SandboxPool(max_processes=1)
    yield p
    await p.close()


def test_stub_signature_follows_the_input_schema():
    stubs = generate_stubs([TICKETS, NOTE])
    assert (
        'async def tickets_search(status: Literal["open", "closed"], limit: int | None = None) -> TicketsSearchResult:'
        in stubs
    )
    assert "async def add_note(text: str | None = None) -> Any:" in stubs
    assert "async def llm(prompt: str, schema: dict[str, Any] | None = None) -> Any:" in stubs


def test_stub_return_types_are_typed_dicts_from_the_output_schema():
    stubs = generate_stubs([TICKETS])
    assert "class TicketsSearchResult(TypedDict):\n    tickets: list[TicketsSearchResultTicketsItem]" in stubs
    # A key that is not an identifier needs the functional TypedDict form.
    assert '"x-priority": NotRequired[float]' in stubs
    assert '"due": NotRequired[str | None]' in stubs


def test_function_names_and_parameter_order_match_the_stubs():
    funcs = {f.tool: f for f in program_functions([TICKETS, NOTE])}
    assert funcs["tickets.search"].python_name == "tickets_search"
    assert funcs["tickets.search"].params == ["status", "limit"]
    assert funcs["tickets.search"].required == ["status"]
    assert funcs["llm"].params == ["prompt", "schema"]
    assert python_name("print") == "print_" and python_name("class") == "class_" and python_name("9lives") == "_9lives"


async def test_generated_stubs_let_the_checker_accept_good_programs(pool):
    program = (
        'r = await tickets_search("open", limit=5)\n'
        'ids = [t["id"] for t in r["tickets"] if t.get("due")]\n'
        'await add_note(text=f"{len(ids)} due")\n'
        'summary = await llm("summarise", schema={"type": "string"})\n'
        "ids\n"
    )
    assert await check_program(pool, program, generate_stubs([TICKETS, NOTE])) == []


async def test_generated_stubs_let_the_checker_reject_wrong_keys_and_arguments(pool):
    program = 'r = await tickets_search("pending")\nr["items"]\n'
    violations = await check_program(pool, program, generate_stubs([TICKETS, NOTE]))
    assert {v.kind for v in violations} == {ViolationKind.program_type}
    assert len(violations) == 2
    assert any("items" in v.message for v in violations)


def test_extract_program_takes_the_first_fenced_block():
    reply = "Here it is:\n```python\nx = 1\nx\n```\nand more\n```python\ny\n```"
    assert extract_program(reply) == "x = 1\nx\n"
    assert extract_program("no code here") is None


def test_capped_view_shows_a_visible_truncation_notice():
    view = capped_view(["a" * 10_000], "out", 0, cap=100)
    assert "[output truncated:" in view and len(view) < 400
    assert "Printed output:\nout" in view
