"""Every public model exports a valid JSON Schema that real instances satisfy (pure, no Temporal)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import referencing
from jsonschema import Draft202012Validator

from agentsteps.contracts import (
    AgentInput,
    AgentResult,
    AgentSpec,
    AgentState,
    LLMConfig,
    LLMRequest,
    LLMResponse,
    LLMToolCall,
    Message,
    ResponseFormat,
    Step,
    ToolCallRecord,
    ToolSchema,
    Usage,
    Violation,
    ViolationKind,
)
from agentsteps.contracts.approvals import ApprovalDecision, ApprovalRecord, PendingApproval
from agentsteps.contracts.monitor import MonitorInput, MonitorReport, MonitorSpec
from agentsteps.contracts.schema_export import PUBLIC_MODELS, export_schemas
from agentsteps.contracts.session import (
    CloseInput,
    ProgressEvent,
    SessionConfig,
    SessionInput,
    SessionOutcome,
    SessionState,
    TurnInput,
    TurnResult,
    TurnSummary,
)

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

REQUIRED = [
    "Message",
    "ToolSchema",
    "LLMConfig",
    "LLMRequest",
    "LLMToolCall",
    "Usage",
    "LLMResponse",
    "Step",
    "AgentSpec",
    "AgentInput",
    "AgentResult",
    "AgentState",
    "Violation",
    "SessionConfig",
    "SessionInput",
    "TurnInput",
    "TurnResult",
    "CloseInput",
    "SessionState",
    "TurnSummary",
    "ProgressEvent",
    "SessionOutcome",
    "PendingApproval",
    "ApprovalDecision",
    "ApprovalRecord",
    "MonitorSpec",
    "MonitorInput",
    "MonitorReport",
]

CONFIG = LLMConfig(model="gpt-4o-2024-08-06")
CALL = LLMToolCall(id="c1", name="get_weather", arguments='{"city": "Paris"}')
USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
VIOLATION = Violation(
    contract="llm.call", phase="post", kind=ViolationKind.truncated, path="$.finish_reason", message="cut off"
)
TOOL = ToolSchema(name="get_weather", parameters={"type": "object"}, output_schema={"type": "object"})
SPEC = AgentSpec(model=CONFIG, tools=["get_weather"], output_schema={"type": "object"}, fallback_models=[CONFIG])
STEP = Step(
    index=0,
    kind="tool_call",
    model=CONFIG.model,
    tool_calls=[ToolCallRecord(call_id="c1", name="get_weather", arguments="{}", content="{}")],
    usage=USAGE,
    violations=[VIOLATION],
)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
APPROVAL = PendingApproval(
    approval_id="t1.0:call_1",
    tool="refund_order",
    arguments='{"order_id": "A-1001"}',
    reason="needs approval",
    requested_at=NOW,
    expires_at=NOW,
)
MONITOR = MonitorSpec(lead="lead.core", model=CONFIG)
EXAMPLES = {
    "Message": Message(role="assistant", tool_calls=[CALL]),
    "ToolSchema": TOOL,
    "LLMConfig": CONFIG,
    "LLMRequest": LLMRequest(
        config=CONFIG,
        messages=[Message.user("hi")],
        tools=[TOOL],
        response_format=ResponseFormat(json_schema={"type": "object"}),
    ),
    "LLMToolCall": CALL,
    "Usage": USAGE,
    "LLMResponse": LLMResponse(message=Message(role="assistant", content="ok"), usage=USAGE, violations=[VIOLATION]),
    "Step": STEP,
    "AgentSpec": SPEC,
    "AgentInput": AgentInput(spec=SPEC, input="weather in Paris?"),
    "AgentResult": AgentResult(status="completed", output={"a": 1}, steps=[STEP], usage=USAGE, violations=[VIOLATION]),
    "AgentState": AgentState(status="running", step=1, model=CONFIG.model, usage=USAGE, violations=0, degradations=0),
    "Violation": VIOLATION,
    "SessionConfig": SessionConfig(stream_tokens=True),
    "SessionInput": SessionInput(spec=SPEC, session=SessionConfig(idle_timeout_seconds=3600)),
    "TurnInput": TurnInput(input="Is it raining in Paris?"),
    "TurnResult": TurnResult(status="completed", output="yes", session_id="desk-1", turn=2, usage=USAGE),
    "CloseInput": CloseInput(reason="resolved"),
    "SessionState": SessionState(
        session_id="desk-1", status="idle", turns=2, created_at=NOW, last_activity=NOW, idle_timeout_seconds=3600
    ),
    "TurnSummary": TurnSummary(turn=1, input="hi", status="completed", started_at=NOW),
    "ProgressEvent": ProgressEvent(kind="tool_call", turn=1, at=NOW, tool="get_weather", detail='{"city": "Paris"}'),
    "SessionOutcome": SessionOutcome(session_id="desk-1", reason="resolved", turns=2),
    "PendingApproval": APPROVAL,
    "ApprovalDecision": ApprovalDecision(approval_id=APPROVAL.approval_id, note="ok", approver="ana"),
    "ApprovalRecord": ApprovalRecord(
        approval_id=APPROVAL.approval_id, tool="refund_order", outcome="approved", decided_at=NOW
    ),
    "MonitorSpec": MONITOR,
    "MonitorInput": MonitorInput(spec=MONITOR),
    "MonitorReport": MonitorReport(monitor="stalled-tickets", as_of=NOW, day="2026-12-01", nudged=["PROJ-1"]),
}


def validator(schema: dict) -> Draft202012Validator:
    # An empty registry: a stray remote $ref fails here instead of being fetched.
    return Draft202012Validator(schema, registry=referencing.Registry())


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict]:
    # One export for the module (each builds all 28 schemas); the tests only read it.
    return export_schemas()


def test_every_listed_model_is_exported(schemas):
    assert sorted(schemas) == sorted(REQUIRED)
    assert sorted(m.__name__ for m in PUBLIC_MODELS) == sorted(REQUIRED)


@pytest.mark.parametrize("name", REQUIRED)
def test_exported_schema_is_valid_draft_2020_12(schemas, name):
    schema = schemas[name]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    json.dumps(schema)  # plain JSON, ready to publish


@pytest.mark.parametrize("name", REQUIRED)
def test_a_real_instance_validates_against_its_exported_schema(schemas, name):
    instance = EXAMPLES[name].model_dump(mode="json")
    errors = [e.message for e in validator(schemas[name]).iter_errors(instance)]
    assert errors == []


def test_exported_schema_rejects_what_the_model_rejects(schemas):
    spec_schema = validator(schemas["AgentSpec"])
    assert not spec_schema.is_valid({"model": {"model": "x"}, "unexpected": 1})
    assert not spec_schema.is_valid({"tools": []})
    violation_schema = validator(schemas["Violation"])
    bad_kind = {**VIOLATION.model_dump(mode="json"), "kind": "not_a_kind"}
    assert not violation_schema.is_valid(bad_kind)


def test_export_is_stable_between_calls():
    assert json.dumps(export_schemas(), sort_keys=True) == json.dumps(export_schemas(), sort_keys=True)
