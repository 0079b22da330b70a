"""The run's state has a stated shape: a frozen configuration, tools that change only through their own verbs,
and a progress whose history has one way in."""

from __future__ import annotations

import dataclasses

import pytest
from agent_support import make_spec

from agentsteps.contracts import LLMConfig, LLMRequest, Message, ToolSchema
from agentsteps.contracts.llm.tool_catalog import ToolCatalogRef
from agentsteps.workflows.approvals import ApprovalDesk
from agentsteps.workflows.run_state import RunConfig, RunProgress, RunTools

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

WEATHER = ToolSchema(name="get_weather", description="w", parameters={"type": "object"})
NOTIFY = ToolSchema(name="send_notification", description="n", parameters={"type": "object"})
CATALOG = ToolCatalogRef(sha256="ab" * 32, count=2)


def _config(**overrides) -> RunConfig:
    return RunConfig(spec=make_spec(), approvals=ApprovalDesk(), **overrides)


def _request(tools: list[ToolSchema]) -> LLMRequest:
    return LLMRequest(
        config=LLMConfig(model="gpt-4o-2024-08-06", max_tokens=64), messages=[Message.user("hi")], tools=tools
    )


def test_the_configuration_is_set_once_at_construction():
    config = _config(scope="t3.", turn=3, stream_tokens=True)
    for field, value in (
        ("spec", make_spec(name="other")),
        ("scope", ""),
        ("turn", 4),
        ("approvals", ApprovalDesk()),
        ("chain", None),
        ("on_event", print),
        ("stream_tokens", False),
        ("key_scope", "other"),
        ("quota", None),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(config, field, value)
    assert config.mode == "tools"


def test_a_run_that_resolves_its_tool_names_learns_the_schemas_once_and_stops_resolving():
    tools = RunTools(pending=["get_weather", "send_notification"])
    assert tools.pending == ("get_weather", "send_notification") and tools.schemas == () and tools.ref is None

    tools.learn([WEATHER, NOTIFY], CATALOG)

    assert tools.pending == () and tools.schemas == (WEATHER, NOTIFY) and tools.ref == CATALOG
    assert tools.schema("get_weather") == WEATHER and tools.schema("unknown") is None


def test_a_session_turn_keeps_the_first_catalog_a_call_stored_and_only_a_session_turn_learns_one():
    turn = RunTools.for_turn([WEATHER, NOTIFY], None)
    turn.stored_as(None)  # a result from a worker before catalogs
    assert turn.ref is None
    turn.stored_as(CATALOG)
    turn.stored_as(ToolCatalogRef(sha256="cd" * 32, count=2))
    assert turn.ref == CATALOG

    one_shot = RunTools([WEATHER, NOTIFY])
    one_shot.stored_as(CATALOG)
    assert one_shot.ref is None


def test_a_session_catalog_of_other_schemas_is_never_named():
    assert RunTools.for_turn([WEATHER], CATALOG).ref is None  # two schemas in the catalog, one in the turn
    assert RunTools.for_turn([WEATHER, NOTIFY], CATALOG).ref == CATALOG


def test_a_call_names_the_catalog_or_asks_to_store_it_only_when_it_carries_exactly_the_run_schemas():
    request = _request([WEATHER, NOTIFY])

    named = RunTools([WEATHER, NOTIFY], ref=CATALOG).on_the_wire(request, request)
    assert named.tools == [] and named.tools_ref == CATALOG

    asked = RunTools.for_turn([WEATHER, NOTIFY], None).on_the_wire(request, request)
    assert asked.store_tools and asked.tools == [WEATHER, NOTIFY]

    other = _request([WEATHER])
    assert RunTools([WEATHER, NOTIFY], ref=CATALOG).on_the_wire(other, other) == other
    assert RunTools([WEATHER, NOTIFY]).on_the_wire(request, request) == request  # no catalog, not a session


def test_the_history_is_read_only_from_outside_the_run_and_changes_through_advance():
    progress = RunProgress()
    with pytest.raises(AttributeError):
        progress.history = [Message.user("x")]  # type: ignore[misc]
    assert progress.history == [] and progress.state().status == "running"
    history = [Message.user("x")]
    assert progress.advance(history) is history and progress.history is history
    progress.request_cancel()
    assert progress.cancel_requested
