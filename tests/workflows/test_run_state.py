"""The run's state has a stated shape: a frozen configuration and a progress whose history has one way in."""

from __future__ import annotations

import dataclasses

import pytest
from agent_support import make_spec

from agentsteps.contracts import Message, ToolSchema
from agentsteps.workflows.approvals import ApprovalDesk
from agentsteps.workflows.run_state import RunConfig, RunProgress

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`


def _config(**overrides) -> RunConfig:
    tools = (ToolSchema(name="get_weather", description="w", parameters={"type": "object"}),)
    return RunConfig(spec=make_spec(), tools=tools, approvals=ApprovalDesk(), **overrides)


def test_the_configuration_is_set_once_at_construction():
    config = _config(scope="t3.", turn=3, stream_tokens=True)
    for field, value in (
        ("spec", make_spec(name="other")),
        ("scope", ""),
        ("turn", 4),
        ("tools", ()),
        ("approvals", ApprovalDesk()),
        ("chain", None),
        ("on_event", print),
        ("stream_tokens", False),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(config, field, value)
    assert config.schemas["get_weather"].name == "get_weather" and config.mode == "tools"


def test_the_history_is_read_only_from_outside_the_run():
    progress = RunProgress()
    with pytest.raises(AttributeError):
        progress.history = [Message.user("x")]  # type: ignore[misc]
    assert progress.history == [] and progress.state().status == "running"
    progress.request_cancel()
    assert progress.cancel_requested
