"""Tool descriptions and the input and output of the tool activity."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

TOOL_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"


class ToolSchema(BaseModel):
    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""
    output_schema: dict[str, Any] | None = None
    side_effects: bool = False
    """Side-effecting tools get an idempotency key so a retry cannot repeat them."""
    requires_approval: bool = False
    """A person must approve each call (the ``approve`` / ``reject`` Updates) before it runs."""
    source: str = "python"
    """``python`` for the in-process registry, ``mcp:<server>`` for MCP tools."""


class ToolCallInput(BaseModel):
    """Input of the ``tools.call`` activity."""

    name: str
    arguments: str
    """Raw JSON text from the model; the activity parses and validates it."""
    call_id: str
    idempotency_key: str
    """run id + call id: stable across activity retries and worker crashes."""


class ToolCallResult(BaseModel):
    """Output of the ``tools.call`` activity.

    A tool's own failure (bad arguments, a domain error) is ``is_error`` and
    goes back to the model; infrastructure failures raise instead so Temporal
    retries them.
    """

    call_id: str
    name: str
    content: str
    """What the model reads: JSON text of the result, or the error message."""
    is_error: bool = False
    structured: Any = None
    """The validated result value, when the tool returns one."""


class ToolsDescribeInput(BaseModel):
    """Input of the ``tools.describe`` activity: the names an agent may use."""

    names: list[str]
