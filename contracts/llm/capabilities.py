"""What a model accepts, from the worker's capability table.

Providers differ per model: OpenAI reasoning models (o-series, gpt-5) reject a
``temperature`` other than the default, newer Claude models reject it outright,
older ones cap it at 1.0; only some Claude models take a JSON-schema
``output_config.format``. The table says which, by glob on the model name; the
operator's rows come first, then ``DEFAULT_CAPABILITIES``, then the provider's
fallback. A request the model cannot take is a precondition violation: the
engine never drops or clamps a value behind the operator's back.
"""

from __future__ import annotations

import math
from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..violations import Violation, ViolationKind
from .request import LLMRequest

ProviderName = Literal["openai", "anthropic"]


class ModelCapability(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: ProviderName
    pattern: str
    """``fnmatch`` glob on the model name, e.g. ``o3*`` or ``claude-sonnet-4-5*``."""
    temperature: bool = True
    """Whether ``temperature`` may be sent at all."""
    max_temperature: float = 2.0
    structured_output: bool = False
    """Anthropic: the model takes ``output_config.format`` (else the schema goes in the system prompt)."""


_CLAUDE_WITH_TEMPERATURE = ("claude-3*", "claude-*-4-2025*", "claude-*-4-0*", "claude-*-4-1*", "claude-*-4-5*")

DEFAULT_CAPABILITIES: tuple[ModelCapability, ...] = (
    *(ModelCapability(provider="openai", pattern=p, temperature=False) for p in ("o1*", "o3*", "o4*", "gpt-5*")),
    *(
        ModelCapability(
            provider="anthropic",
            pattern=p,
            max_temperature=1.0,
            structured_output=p in ("claude-*-4-1*", "claude-*-4-5*"),
        )
        for p in _CLAUDE_WITH_TEMPERATURE
    ),
    # Claude models newer than the table: no temperature, structured output on.
    ModelCapability(provider="anthropic", pattern="claude-*", temperature=False, structured_output=True),
)

_FALLBACK: dict[str, ModelCapability] = {
    # OpenAI-compatible servers (vLLM, Ollama, ...) take a temperature in [0, 2].
    "openai": ModelCapability(provider="openai", pattern="*"),
    "anthropic": ModelCapability(provider="anthropic", pattern="*", max_temperature=1.0),
}


def capability_for(
    provider: str, model: str, table: tuple[ModelCapability, ...] | list[ModelCapability] = ()
) -> ModelCapability:
    rows: tuple[ModelCapability, ...] = (*table, *DEFAULT_CAPABILITIES)
    for row in rows:
        if row.provider == provider and fnmatchcase(model, row.pattern):
            return row
    return _FALLBACK.get(provider, _FALLBACK["openai"])


def check_capabilities(request: LLMRequest, capability: ModelCapability, contract: str = "llm.call") -> list[Violation]:
    """The request's settings against what its model accepts."""
    t = request.config.temperature
    if t is None or not isinstance(t, int | float) or not math.isfinite(t):
        return []
    model = request.config.model
    if not capability.temperature:
        return [
            Violation(
                contract=contract,
                phase="pre",
                kind=ViolationKind.temperature_unsupported,
                path="$.config.temperature",
                message=f"model {model!r} does not accept a temperature; leave it unset, "
                "or declare the model in the [[providers.models]] capability table",
            )
        ]
    if t > capability.max_temperature:
        return [
            Violation(
                contract=contract,
                phase="pre",
                kind=ViolationKind.temperature_out_of_range,
                path="$.config.temperature",
                message=f"temperature is {t:g}; model {model!r} accepts at most {capability.max_temperature:g}",
            )
        ]
    return []
