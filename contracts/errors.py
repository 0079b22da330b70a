"""The project's exception tree.

    AgentStepsError
    ├── InvalidSpecError           bad AgentSpec, config or pipeline file; names the field
    ├── CompositionError           a pipeline's edges do not compose; carries an EdgeReport per edge
    ├── ContractViolationError     re-prompts and degradations spent; names contract, kind, path
    ├── BudgetExceededError        token or step budget spent
    ├── ProviderError              an LLM provider answered badly
    │   ├── RetryableProviderError     408/409/429/5xx, timeouts, resets (Temporal retries)
    │   └── NonRetryableProviderError  400/401/403/404/422, malformed bodies
    └── ToolError                  a tool's own failure; goes back to the model

Contract violations themselves are values (``Violation``); these exceptions are
raised only once the workflow has run out of ways to handle them. Each class
name is also the Temporal ``ApplicationError`` type, so backends in any
language can match on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from .json_schema import json_path
from .violations import Violation, ViolationKind

if TYPE_CHECKING:
    from .composition import EdgeReport


class AgentStepsError(Exception):
    """Base of every error this project raises on purpose."""


class InvalidSpecError(AgentStepsError):
    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        what = violations[0].contract.replace("_", " ") if violations else "input"
        detail = "; ".join(f"{v.path}: {v.message}" for v in violations)
        super().__init__(f"invalid {what}: {detail}")

    @classmethod
    def from_validation(cls, exc: ValidationError, contract: str) -> InvalidSpecError:
        """One violation per pydantic error, each naming its field as a JSON path."""
        return cls(
            [
                Violation(
                    contract=contract,
                    phase="pre",
                    kind=ViolationKind.invalid_config,
                    path=json_path("$", e["loc"]),
                    message=e["msg"],
                )
                for e in exc.errors()
            ]
        )


class CompositionError(AgentStepsError):
    """``compose`` found a refuted edge or an unproven edge nobody acknowledged."""

    def __init__(self, edges: list[EdgeReport]) -> None:
        self.edges = edges
        failing = [e for e in edges if not e.ok]
        detail = "; ".join(f"{e.edge}: {e.verdict.value} ({e.reason})" for e in failing)
        super().__init__(f"contracts do not compose: {detail}")

    @property
    def failing(self) -> list[EdgeReport]:
        return [e for e in self.edges if not e.ok]


class ContractViolationError(AgentStepsError):
    def __init__(self, violation: Violation) -> None:
        self.violation = violation
        super().__init__(
            f"contract {violation.contract!r} violated ({violation.kind.value} at {violation.path}): "
            f"{violation.message}"
        )


class BudgetExceededError(AgentStepsError):
    pass


class ProviderError(AgentStepsError):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class RetryableProviderError(ProviderError):
    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status)


class NonRetryableProviderError(ProviderError):
    pass


class ToolError(AgentStepsError):
    """Raise from a tool to report a domain failure the model should see."""
