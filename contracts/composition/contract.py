"""Contracts as values, and their sequential composition ``C = C1 ; C2 ; C3``.

A ``Contract`` is a step's interface: an input schema plus named runtime
predicates (Pre), an output schema plus named runtime predicates (Post).
``compose`` checks every edge ``C_i -> C_{i+1}``: is each value allowed by
``Post_i``'s output schema accepted by ``Pre_{i+1}``'s input schema? (see
``prover``). When every edge holds, the derived contract has
``Pre_C = Pre_1`` and ``Post_C = Post_n``.

An unproven edge composes only when the pipeline acknowledges it by name
(``"extract->update_ticket"``); it is then checked at run time on every value,
like every predicate. A refuted edge never composes: the error carries the
counterexample.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import AgentStepsError, InvalidSpecError
from ..violations import Violation, ViolationKind
from .predicates import resolve_predicate
from .prover import CompatResult, Counterexample, Verdict, check_schema_compat, ensure_schema


class ContractKind(StrEnum):
    llm = "llm"
    """LLM -> tool-call JSON (C1 in the seed)."""
    tool = "tool"
    """tool(args) -> result (C2)."""
    code = "code"
    """A code-mode program -> result."""
    llm_final = "llm_final"
    """LLM(history + result) -> final JSON (C3)."""


class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: ContractKind
    input_schema: dict[str, Any] | bool = Field(default_factory=dict)
    pre: list[str] = Field(default_factory=list)
    """Names of runtime predicates on the input (see ``predicates``)."""
    output_schema: dict[str, Any] | bool = Field(default_factory=dict)
    post: list[str] = Field(default_factory=list)
    """Names of runtime predicates on the output."""


class EdgeReport(BaseModel):
    edge: str
    """``"<source>-><target>"``, the name acknowledgements use."""
    index: int
    source: str
    target: str
    verdict: Verdict
    reason: str = ""
    path: str = "$"
    counterexample: Counterexample | None = None
    acknowledged: bool = False
    """An unproven edge the pipeline accepted; its schema is checked at run time."""
    runtime_checks: list[str] = Field(default_factory=list)
    """Predicates on this edge, e.g. ``post extract: non_empty``: checked at run time, never proven."""

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.proven or (self.verdict is Verdict.unproven and self.acknowledged)


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


class ComposedContract(BaseModel):
    name: str
    steps: list[Contract]
    edges: list[EdgeReport]
    input_schema: dict[str, Any] | bool
    """``Pre_C = Pre_1``."""
    pre: list[str]
    output_schema: dict[str, Any] | bool
    """``Post_C = Post_n``."""
    post: list[str]


def edge_name(source: str, target: str) -> str:
    return f"{source}->{target}"


def _spec_error(path: str, message: str) -> InvalidSpecError:
    return InvalidSpecError(
        [Violation(contract="pipeline", phase="pre", kind=ViolationKind.invalid_config, path=path, message=message)]
    )


def _validate(contracts: list[Contract], acknowledged: set[str]) -> None:
    if not contracts:
        raise _spec_error("$.steps", "a pipeline needs at least one step")
    seen: set[str] = set()
    for i, c in enumerate(contracts):
        if c.name in seen:
            raise _spec_error(f"$.steps[{i}].name", f"step name {c.name!r} is used twice; edges are named by step")
        seen.add(c.name)
        ensure_schema(c.input_schema, where=f"$.steps[{i}].input_schema")
        ensure_schema(c.output_schema, where=f"$.steps[{i}].output_schema")
        for field in ("pre", "post"):
            for j, name in enumerate(getattr(c, field)):
                resolve_predicate(name, where=f"$.steps[{i}].{field}[{j}]")
    edges = {edge_name(a.name, b.name) for a, b in zip(contracts, contracts[1:])}
    for ack in sorted(acknowledged - edges):
        raise _spec_error("$.acknowledge_unproven", f"{ack!r} is not an edge of this pipeline; edges: {sorted(edges)}")


def check_edges(contracts: Iterable[Contract], acknowledged_unproven: Iterable[str] = ()) -> list[EdgeReport]:
    """One ``EdgeReport`` per edge, without raising on failing edges (``agentsteps check`` prints them)."""
    steps = list(contracts)
    acknowledged = set(acknowledged_unproven)
    _validate(steps, acknowledged)
    reports: list[EdgeReport] = []
    for i, (a, b) in enumerate(zip(steps, steps[1:])):
        name = edge_name(a.name, b.name)
        result: CompatResult = check_schema_compat(a.output_schema, b.input_schema)
        reports.append(
            EdgeReport(
                edge=name,
                index=i,
                source=a.name,
                target=b.name,
                verdict=result.verdict,
                reason=result.reason,
                path=result.path,
                counterexample=result.counterexample,
                acknowledged=name in acknowledged and result.verdict is Verdict.unproven,
                runtime_checks=[f"post {a.name}: {p}" for p in a.post] + [f"pre {b.name}: {p}" for p in b.pre],
            )
        )
    return reports


def compose(
    *contracts: Contract, acknowledged_unproven: Iterable[str] = frozenset(), name: str = "pipeline"
) -> ComposedContract:
    """``C1 ; C2 ; ... ; Cn``, or ``CompositionError`` carrying every edge's report."""
    steps = list(contracts)
    edges = check_edges(steps, acknowledged_unproven)
    if not all(e.ok for e in edges):
        raise CompositionError(edges)
    return ComposedContract(
        name=name,
        steps=steps,
        edges=edges,
        input_schema=steps[0].input_schema,
        pre=list(steps[0].pre),
        output_schema=steps[-1].output_schema,
        post=list(steps[-1].post),
    )
