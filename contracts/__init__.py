"""The pure typed core: messages, tools, LLM calls, steps, violations, specs.

No I/O and no Temporal here; activities and workflows build on these types.
"""

from .errors import (
    AgentStepsError,
    BudgetExceededError,
    ContractViolationError,
    InvalidSpecError,
    NonRetryableProviderError,
    ProviderError,
    RetryableProviderError,
    ToolError,
)
from .llm import LLMConfig, LLMRequest, LLMResponse, ResponseFormat, Usage
from .messages import LLMToolCall, Message
from .spec import (
    AgentInput,
    AgentResult,
    AgentSpec,
    AgentState,
    DefaultResult,
    Degradation,
    Step,
    ToolCallRecord,
)
from .tools import ToolCallInput, ToolCallResult, ToolSchema
from .violations import Violation, ViolationKind

__all__ = [
    "AgentInput",
    "AgentResult",
    "AgentSpec",
    "AgentState",
    "AgentStepsError",
    "BudgetExceededError",
    "ContractViolationError",
    "DefaultResult",
    "Degradation",
    "InvalidSpecError",
    "LLMConfig",
    "LLMRequest",
    "LLMResponse",
    "LLMToolCall",
    "Message",
    "NonRetryableProviderError",
    "ProviderError",
    "ResponseFormat",
    "RetryableProviderError",
    "Step",
    "ToolCallInput",
    "ToolCallRecord",
    "ToolCallResult",
    "ToolError",
    "ToolSchema",
    "Usage",
    "Violation",
    "ViolationKind",
]
