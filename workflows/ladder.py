"""The declared way down after a violation: re-prompt, next model, default, fail.

One ladder for the agent (tool loop and code mode), the pipeline's LLM and tool
steps and the monitor's nudge drafts. Each ``step`` advances one rung, records
the rung's metric (``agentsteps_reprompts`` / ``agentsteps_degradations``, the
same label values everywhere) and returns a ``Decision``; ``retry_history``
gives the history the next attempt starts from, and the caller records the
rest (degradations, its default) on its own result. Deterministic: no I/O, replay-safe metrics.

A refusal is re-prompted at most once: a model that refused a call twice in a
row will not be argued out of it, so the second refusal skips the re-prompt
rung (``releases.gates.second_refusal_degrades``, so runs in flight replay as they ran).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import DefaultResult, Degradation, LLMConfig, Message, Violation, ViolationKind
    from ..contracts.errors import ContractViolationError
    from ..contracts.llm.reprompt import reprompt_messages
    from ..failures import to_application_error
    from ..telemetry import workflow_metrics
    from .effects import with_note
    from .releases.gates import second_refusal_degrades

DEFAULT_TARGET = "default_result"
"""``Degradation.to`` when a run falls back to its declared default."""


class Rung(Enum):
    reprompt = "reprompt"
    fallback = "fallback"
    default = "default"
    fail = "fail"


@dataclass(frozen=True)
class Decision:
    rung: Rung
    reason: Violation
    """The first violation: what a degradation or the typed failure reports."""
    from_model: str
    to: str
    """The next model, ``default_result``, or empty for a re-prompt or a failure."""

    def degradation(self, step: int) -> Degradation:
        return Degradation(step=step, from_model=self.from_model, to=self.to, reason=self.reason)


class ViolationLadder:
    def __init__(
        self,
        models: Sequence[LLMConfig],
        reprompt_budget: int,
        default: DefaultResult | None,
        *,
        release: bool = False,
    ) -> None:
        """``models`` is the primary then the fallbacks; empty for a step that has no model (a tool).

        ``release``: the run took ``RELEASE_PATCH``, so the refusal rule holds without asking its own id.
        """
        self._release = release
        self._models = list(models)
        self._budget = reprompt_budget
        self.default = default
        self._index = 0
        self.reprompts_used = 0
        self._refused_last = False

    @property
    def current(self) -> LLMConfig:
        return self._models[self._index]

    def _current_name(self, unnamed: str) -> str:
        return self._models[self._index].model if self._models else unnamed

    def accepted(self) -> None:
        """The current call got an answer that met its contract; a later refusal starts a new streak.

        A caller that reuses one ladder for many calls (the agent's tool loop) says so here.
        """
        self._refused_last = False

    def step(self, violations: Sequence[Violation], *, source: str = "") -> Decision:
        """Advance one rung after ``violations`` (at least one) and record it.

        ``source`` names what failed when the ladder has no model (a tool step).
        """
        first = violations[0]
        failed = self._current_name(source)
        refused = any(v.kind is ViolationKind.refusal for v in violations)
        refused_again = refused and self._refused_last
        self._refused_last = refused
        if self.reprompts_used < self._budget and not (refused_again and second_refusal_degrades(self._release)):
            self.reprompts_used += 1
            for v in violations:
                workflow_metrics.record_reprompt(v.contract, v.kind.value)
            return Decision(Rung.reprompt, first, failed, "")
        if self._index + 1 < len(self._models):
            self._index += 1
            self.reprompts_used = 0
            self._refused_last = False  # a new model is a new attempt at the call
            workflow_metrics.record_degradation(first.kind.value, "fallback")
            return Decision(Rung.fallback, first, failed, self.current.model)
        if self.default is not None:
            workflow_metrics.record_degradation(first.kind.value, "default")
            return Decision(Rung.default, first, failed, DEFAULT_TARGET)
        return Decision(Rung.fail, first, failed, "")


def retry_history(
    decision: Decision,
    history: Sequence[Message],
    restart: Sequence[Message],
    answer: Message,
    violations: list[Violation],
    note: str | None = None,
) -> list[Message] | None:
    """The history the next attempt starts from, or None when the ladder left no attempt (default, fail).

    A re-prompt adds the violating ``answer`` and the report to ``history``; a
    fallback model starts over from ``restart``. ``note`` (what already took
    effect) joins the last user message of either.
    """
    if decision.rung is Rung.reprompt:
        return [*history, *with_note(reprompt_messages(answer, violations), note)]
    if decision.rung is Rung.fallback:
        return with_note(list(restart), note)
    return None


def violation_error(v: Violation, *, edge: str | None = None) -> ApplicationError:
    """The typed failure once no rung is left; a pipeline names the edge it failed on."""
    message = f"contract {v.contract!r} violated ({v.kind.value} at {v.path}): {v.message}"
    details: dict[str, Any] = v.model_dump(mode="json")
    if edge is not None:
        message = f"edge {edge}: {message}"
        details = {"edge": edge, **details}
    return to_application_error(ContractViolationError.with_message(message), details)


__all__ = ["DEFAULT_TARGET", "Decision", "Rung", "ViolationLadder", "retry_history", "violation_error"]
