"""The JSON Schema of every public model, so a backend in any language can build inputs and read results."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .approvals import ApprovalDecision, ApprovalRecord, PendingApproval
from .llm.messages import LLMToolCall, Message
from .llm.request import LLMConfig, LLMRequest, LLMResponse, Usage
from .llm.tools import ToolSchema
from .monitor import MonitorInput, MonitorReport, MonitorSpec
from .session import (
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
from .spec import AgentInput, AgentResult, AgentSpec, AgentState, Step
from .violations import Violation

PUBLIC_MODELS: tuple[type[BaseModel], ...] = (
    Message,
    ToolSchema,
    LLMConfig,
    LLMRequest,
    LLMToolCall,
    Usage,
    LLMResponse,
    Step,
    AgentSpec,
    AgentInput,
    AgentResult,
    AgentState,
    Violation,
    # Sessions: the input, the turn and close Updates, the state and turns queries, the progress stream.
    SessionConfig,
    SessionInput,
    TurnInput,
    TurnResult,
    CloseInput,
    SessionState,
    TurnSummary,
    ProgressEvent,
    SessionOutcome,
    # Approvals: the approvals query, the approve / reject Updates and what they return.
    PendingApproval,
    ApprovalDecision,
    ApprovalRecord,
    # The stalled-ticket monitor: its input (as a schedule starts it) and its report.
    MonitorSpec,
    MonitorInput,
    MonitorReport,
)


def export_schemas() -> dict[str, dict[str, Any]]:
    """``{model name: JSON Schema}`` of what each model accepts (pydantic's validation mode).

    Each schema is self-contained (``$defs`` inline) and declares Draft 2020-12.
    """
    out: dict[str, dict[str, Any]] = {}
    for model in PUBLIC_MODELS:
        schema = model.model_json_schema(mode="validation")
        out[model.__name__] = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    return out


__all__ = ["PUBLIC_MODELS", "export_schemas"]
