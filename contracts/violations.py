"""A violation is a failed contract condition, returned as a value.

The workflow decides what to do with it (re-prompt, degrade, fail), so a
violation carries everything the model needs to fix its answer: the kind, the
JSON path of the offending value and a message written for the model to read.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict


class ViolationKind(StrEnum):
    # Preconditions: checked before any provider call.
    invalid_role_order = "invalid_role_order"
    context_overflow = "context_overflow"
    token_budget = "token_budget"
    invalid_tool_schema = "invalid_tool_schema"
    temperature_out_of_range = "temperature_out_of_range"
    invalid_max_tokens = "invalid_max_tokens"
    unpinned_model = "unpinned_model"
    unknown_tool_in_spec = "unknown_tool_in_spec"
    invalid_output_schema = "invalid_output_schema"
    invalid_budget = "invalid_budget"
    invalid_config = "invalid_config"
    temperature_unsupported = "temperature_unsupported"
    # Postconditions: checked on the provider's answer.
    unknown_tool = "unknown_tool"
    tool_arguments_not_json = "tool_arguments_not_json"
    tool_arguments_invalid = "tool_arguments_invalid"
    response_not_json = "response_not_json"
    response_schema_mismatch = "response_schema_mismatch"
    usage_inconsistent = "usage_inconsistent"
    truncated = "truncated"
    """Stopped at max_tokens or the context window: the partial answer is not used."""
    empty_response = "empty_response"
    refusal = "refusal"
    """The model refused; the violation carries its text. Re-prompted at most once."""
    content_filtered = "content_filtered"
    """The provider's content filter cut the answer."""
    incomplete = "incomplete"
    """Any other non-final stop (Anthropic ``pause_turn``, an unknown reason)."""
    served_model = "served_model"
    """The provider served a different model than the pinned one."""
    # Tool results and programs.
    tool_output_invalid = "tool_output_invalid"
    program_syntax = "program_syntax"
    program_type = "program_type"
    program_failed = "program_failed"
    predicate_failed = "predicate_failed"


Phase = Literal["pre", "post"]


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)

    contract: str
    """Which contract failed, e.g. ``llm.call`` or ``tool.get_weather``."""
    phase: Phase
    kind: ViolationKind
    path: str
    """JSON path of the offending value, e.g. ``$.tool_calls[0].arguments.city``."""
    message: str
    """Written for the model: says what was wrong and what is expected."""

    def for_model(self) -> str:
        return f"[{self.kind.value}] at {self.path}: {self.message}"
