"""A tool result's value is in history once: ``tools.call`` drops ``structured`` when ``content`` is its JSON."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts.llm.tools import ToolCallInput, ToolCallResult, result_value, stored_once
from agentsteps.workflows.calls import call_outcome

pytestmark = pytest.mark.fast


def _result(content: str, structured: object) -> ToolCallResult:
    return ToolCallResult(call_id="c1", name="t", content=content, structured=structured)


def test_a_value_whose_json_is_the_content_is_stored_once_and_still_read_back():
    value = {"rows": [{"id": i, "note": "x" * 40} for i in range(40)], "ok": True, "ratio": 0.1}
    kept = stored_once(_result(json.dumps(value), value))
    assert kept.structured is None
    assert result_value(kept) == value
    assert call_outcome(1, kept).value == value


def test_a_value_the_content_does_not_give_back_is_kept():
    blocks = [{"type": "text", "text": "hi"}, {"type": "image", "mime": "image/png"}]
    assert stored_once(_result("hi [image/png]", blocks)).structured == blocks
    # json.dumps(default=str) turned a non-JSON value into text: the content alone would lose its shape.
    assert stored_once(_result('{"a": [1, 2]}', {"a": (1, 2)})).structured == {"a": (1, 2)}
    assert stored_once(_result('{"x": NaN}', {"x": float("nan")})).structured is not None


def test_hostile_content_never_crashes_the_check_or_the_reader():
    deep = "[" * 100_000 + "]" * 100_000
    assert stored_once(_result(deep, [[1]])).structured == [[1]]  # does not parse strictly: kept as given
    text_only = ToolCallResult(call_id="c1", name="t", content=deep)
    assert result_value(text_only) == deep  # a program reads the text, the workflow task survives
    error = ToolCallResult(call_id="c1", name="t", content="error: no", is_error=True, structured={"a": 1})
    assert stored_once(error) is error


class Day(BaseModel):
    day: int


async def test_the_activity_returns_a_python_tool_result_once():
    registry = ToolRegistry()

    @registry.tool()
    def report(query: Day) -> dict:
        """A day's report."""
        return {"day": query.day, "lines": ["y" * 100] * 20}

    result = await ToolActivities(registry).call(
        ToolCallInput(name="report", arguments='{"day": 3}', call_id="c1", idempotency_key="k1")
    )
    assert not result.is_error and result.structured is None
    assert result_value(result) == {"day": 3, "lines": ["y" * 100] * 20}
    assert len(result.model_dump_json()) < 1.2 * len(result.content)
