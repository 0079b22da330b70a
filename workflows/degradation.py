"""The declared way down after a violation: re-prompt, next model, default, fail.

Pure and deterministic so the agent loop and the pipeline share one policy.
"""

from __future__ import annotations

from enum import Enum

from ..contracts import AgentSpec, LLMConfig


class Decision(Enum):
    reprompt = "reprompt"
    fallback = "fallback"
    default = "default"
    fail = "fail"


class ModelLadder:
    def __init__(self, spec: AgentSpec) -> None:
        self._models = [spec.model, *spec.fallback_models]
        self._budget = spec.reprompt_budget
        self._has_default = spec.default_result is not None
        self._index = 0
        self.reprompts_used = 0

    @property
    def current(self) -> LLMConfig:
        return self._models[self._index]

    def on_violation(self) -> Decision:
        """Advance the ladder one rung and say which rung we are on."""
        if self.reprompts_used < self._budget:
            self.reprompts_used += 1
            return Decision.reprompt
        if self._index + 1 < len(self._models):
            self._index += 1
            self.reprompts_used = 0
            return Decision.fallback
        return Decision.default if self._has_default else Decision.fail
