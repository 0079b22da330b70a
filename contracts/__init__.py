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
from .llm.messages import LLMToolCall, Message
from .llm.request import LLMConfig, LLMRequest, LLMResponse, ResponseFormat, Usage
from .llm.tools import ToolCallInput, ToolCallResult, ToolSchema
from .spec import (
    AgentInput,
    AgentResult,
    AgentSpec,
    AgentState,
    DefaultResult,
    Degradation,
    EffectRecord,
    ForkOrigin,
    Step,
    ToolCallRecord,
)
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
    "EffectRecord",
    "ForkOrigin",
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
