"""AgentWorkflow's input, result and query types.

New fields always get defaults so histories recorded by older versions still
replay.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .approvals import ApprovalRecord
from .code.program import ForkedProgram, ProgramLimits
from .llm.messages import Message
from .llm.request import ContextAction, ContextPolicy, LLMConfig, Usage
from .quotas.wire import QuotaPlan
from .violations import Violation


class DefaultResult(BaseModel):
    """Wrapped so that ``null`` can itself be a declared default."""

    value: Any


class ActivityPolicy(BaseModel):
    """Timeout and retry policy for one kind of activity (LLM calls or tool calls)."""

    model_config = ConfigDict(extra="forbid")

    start_to_close_seconds: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=6, ge=1)
    initial_interval_seconds: float = Field(default=1.0, gt=0)
    maximum_interval_seconds: float = Field(default=60.0, gt=0)
    heartbeat_seconds: float | None = Field(default=None, gt=0)
    """Heartbeat timeout; a tool that reports MCP progress heartbeats with it, so a long call survives."""


class AgentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "agent"
    model: LLMConfig
    system_prompt: str = "You are a careful assistant. Use the tools when they help."
    tools: list[str] = Field(default_factory=list)
    """Names of the tools the agent may call."""
    mode: Literal["tools", "code"] = "tools"
    output_schema: dict[str, Any] | None = None
    """JSON Schema of the final answer; when set, the final message must be JSON that validates."""
    max_steps: int = 10
    token_budget: int = 200_000
    reprompt_budget: int = 2
    """Re-prompts per model before degrading to the next one in ``fallback_models``."""
    fallback_models: list[LLMConfig] = Field(default_factory=list)
    default_result: DefaultResult | None = None
    allowed_model_aliases: list[str] = Field(default_factory=list)
    approval_timeout_seconds: float = Field(default=86_400.0, gt=0)
    """How long a tool call that requires approval waits for a person before it is rejected (default 1 day)."""
    context_policy: ContextPolicy = "none"
    """When the conversation outgrows the model's window: ``truncate`` (keep the system prompt and the
    latest turns that fit) or ``summarize`` (a contracted summary replaces the oldest turns)."""
    code_limits: ProgramLimits = Field(default_factory=ProgramLimits)
    """Code mode only: sandbox limits per program."""
    tool_result_chars: int = Field(default=32_000, ge=200)
    """Tool mode only: a longer tool result is cut to this many characters, with a notice the model reads."""
    llm_policy: ActivityPolicy = Field(default_factory=ActivityPolicy)
    tool_policy: ActivityPolicy = Field(default_factory=lambda: ActivityPolicy(start_to_close_seconds=60.0))


class AgentInput(BaseModel):
    spec: AgentSpec
    input: str
    fork: ForkOrigin | None = None
    """Set on a fork (``client/forks.py``): the run starts from another run's conversation and knows its effects."""
    tenant: str | None = None
    """The customer the run bills to: its search attribute (``AgentStepsTenant``) and metric label."""
    quota: QuotaPlan | None = None
    """Deprecated and ignored: the worker's own config decides which quota and budget accounts a run's calls go
    through (the ``quota.plan`` local activity). Kept so older clients' inputs still decode; read only when a run
    recorded before ``QUOTA_FROM_WORKER_PATCH`` replays."""
    key_scope: str | None = None
    """Where effect keys are unique. Unset: this run (its workflow chain), so two runs never share a
    key. Set by a backend that wants a tool to dedupe across runs: runs with the same scope give the
    same call at the same step the same key. The model never sees or sets a key (``key_scope_problem``)."""


KEY_SCOPE_CHARS = 200


def key_scope_problem(scope: str | None) -> str | None:
    """Why ``scope`` cannot name a key scope (checked by the workflow, so a bad one fails typed)."""
    if scope is None:
        return None
    if not 0 < len(scope) <= KEY_SCOPE_CHARS:
        return f"key_scope must be 1 to {KEY_SCOPE_CHARS} characters, not {len(scope)}"
    if not scope.isprintable():
        return "key_scope must be printable text (no control characters)"
    return None


class ToolCallRecord(BaseModel):
    call_id: str
    name: str
    arguments: str
    content: str
    is_error: bool = False


class EffectRecord(BaseModel):
    """A side-effecting call that took effect in this run (or may have: ``outcome = "unknown"``).

    A later identical call in the same logical step (a re-prompted program, a
    fallback model's program) gets the same key and is answered from this record
    without calling the tool again.
    """

    key: str
    tool: str
    arguments: str
    """Canonical JSON of the arguments, capped."""
    content: str
    """What the call returned, capped."""
    outcome: Literal["done", "unknown"] = "done"


class ForkOrigin(BaseModel):
    """Where a forked run starts: the source run's conversation before ``at_step``, and its side effects.

    ``effects`` are every effect the source made (the world keeps them, whatever step the fork starts at):
    the fork's model is told of them, and an identical call is answered from them, never executed again.
    """

    workflow_id: str
    at_step: int = Field(ge=0)
    messages: list[Message]
    """The conversation after the system prompt: the user input and the steps before ``at_step``."""
    effects: list[EffectRecord] = Field(default_factory=list)
    program: ForkedProgram | None = None
    """Code mode, a fork inside a program: the program paused before that call (``messages`` then end
    before the model step that wrote it)."""


StepKind = Literal["assistant", "tool_call", "final"]


class Step(BaseModel):
    """One loop iteration: (H, S) -> (H', S')."""

    index: int
    kind: StepKind
    model: str
    content: str | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    violations: list[Violation] = Field(default_factory=list)
    context: ContextAction | None = None
    """Set when the context policy compacted this step's request."""
    started_at: datetime | None = None
    """When the step's model call was scheduled (workflow time); unset in runs recorded before it."""
    seconds: float | None = None
    """From ``started_at`` to the step's record: the model call, then its tool calls (or its program)."""
    cost_usd: float = 0.0
    """The step's model call priced by the worker's price table (0 for unpriced models)."""
    program: str | None = None
    """Code mode: the program the model wrote in this step (``content`` is then what it returned)."""


class Degradation(BaseModel):
    step: int
    from_model: str
    to: str
    """The next model's name, or ``default_result``."""
    reason: Violation


RunStatus = Literal["running", "waiting_for_quota", "completed", "completed_with_default", "cancelled", "failed"]
"""``waiting_for_quota``: only in the ``state`` query, while a model call waits for its quota's grant."""


class AgentResult(BaseModel):
    status: RunStatus
    output: Any = None
    """Parsed JSON when the spec has an output schema, otherwise the final text."""
    steps: list[Step] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    violations: list[Violation] = Field(default_factory=list)
    degradations: list[Degradation] = Field(default_factory=list)
    model: str = ""
    """The model that produced the final answer."""
    effects: list[EffectRecord] = Field(default_factory=list)
    """Side-effecting calls that took effect, in the order they completed."""
    approvals: list[ApprovalRecord] = Field(default_factory=list)
    """How each call that waited for a person was decided: by whom, when, with what note (one-shot runs)."""
    mode: Literal["tools", "code"] = "tools"
    """The spec's mode: in code mode a step's content is the program the model wrote."""
    cost_usd: float = 0.0
    """Every model call of the run priced by the worker's price table (0 for unpriced models)."""
    catalog_digest: str = ""
    """``sha256:`` digest of the tool schemas the run was given (``contracts.llm.tools.catalog_digest``);
    empty for runs recorded before it existed, or without tools."""


class AgentState(BaseModel):
    """What the ``state`` query returns while a run is in flight."""

    status: RunStatus
    step: int
    model: str
    usage: Usage
    violations: int
    degradations: int
    last_step: StepKind | None = None
    mode: Literal["tools", "code"] = "tools"


# AgentInput names ForkOrigin, defined below it: resolve it now, not at the first payload a worker decodes.
AgentInput.model_rebuild()
