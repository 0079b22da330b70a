"""Declarative pipelines: the parsed form of a pipeline file (see docs/pipelines.md).

Pure: ``parse_pipeline`` takes data already read from TOML or JSON, and
``to_contracts`` takes an injected ``resolve_model`` for ``"module:Class"``
schema references, so neither reads files nor imports modules itself
(``client/pipeline_files.py`` does both). Every problem is an ``InvalidSpecError`` whose
violations name the field, e.g. ``$.steps[1].kind``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InvalidSpecError
from ..json_schema import clip, json_path
from ..llm.request import LLMConfig
from ..spec import DefaultResult
from ..violations import Violation, ViolationKind
from .contract import Contract, ContractKind, edge_name

STEP_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
MODEL_REF_PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

SchemaSource = dict[str, Any] | bool | str
"""An inline JSON Schema, or ``"package.module:Model"`` naming a pydantic model."""

ModelResolver = Callable[[str], dict[str, Any]]


class StepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=STEP_NAME_PATTERN)
    kind: ContractKind
    input_schema: SchemaSource = Field(default_factory=dict)
    output_schema: SchemaSource = Field(default_factory=dict)
    pre: list[str] = Field(default_factory=list)
    post: list[str] = Field(default_factory=list)
    prompt: str = ""
    """LLM steps: the instructions; the step's input follows as JSON."""
    tool: str | None = None
    """Tool steps: the registered tool's name (defaults to the step name)."""
    model: LLMConfig | None = None
    """LLM steps: overrides the pipeline's ``model``."""
    reprompt_budget: int = Field(default=2, ge=0, le=10)
    fallback_models: list[LLMConfig] = Field(default_factory=list)
    default_result: DefaultResult | None = None
    """Used when re-prompts and fallbacks are spent; must satisfy the output schema."""


class PipelineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=STEP_NAME_PATTERN)
    description: str = ""
    model: LLMConfig | None = None
    """Default model for LLM steps."""
    acknowledge_unproven: list[str] = Field(default_factory=list)
    """Edges (``"a->b"``) accepted although unproven; checked at run time on every value."""
    steps: list[StepSpec] = Field(min_length=1)


def _violation(path: str, message: str) -> Violation:
    return Violation(
        contract="pipeline", phase="pre", kind=ViolationKind.invalid_config, path=path, message=clip(message)
    )


def parse_pipeline(data: Any) -> PipelineSpec:
    """Validate already-read pipeline data; ``InvalidSpecError`` names each bad field."""
    if not isinstance(data, dict):
        raise InvalidSpecError([_violation("$", f"a pipeline must be a table/object, got {type(data).__name__}")])
    try:
        spec = PipelineSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidSpecError(
            [
                _violation(json_path("$", [p for p in e["loc"] if isinstance(p, str | int)]), e["msg"])
                for e in exc.errors()[:5]
            ]
        ) from None
    problems: list[Violation] = []
    seen: set[str] = set()
    for i, step in enumerate(spec.steps):
        if step.name in seen:
            problems.append(_violation(f"$.steps[{i}].name", f"step name {step.name!r} is used twice"))
        seen.add(step.name)
        for field in ("input_schema", "output_schema"):
            source = getattr(step, field)
            if isinstance(source, str) and not MODEL_REF_PATTERN.match(source):
                problems.append(
                    _violation(f"$.steps[{i}].{field}", f"{source!r} is neither a JSON Schema nor 'module:Model'")
                )
        if step.kind is not ContractKind.tool and step.tool is not None:
            problems.append(_violation(f"$.steps[{i}].tool", "only tool steps name a tool"))
    edges = {edge_name(a.name, b.name) for a, b in zip(spec.steps, spec.steps[1:])}
    for j, ack in enumerate(spec.acknowledge_unproven):
        if ack not in edges:
            problems.append(
                _violation(f"$.acknowledge_unproven[{j}]", f"{ack!r} is not an edge; edges: {', '.join(sorted(edges))}")
            )
    if problems:
        raise InvalidSpecError(problems)
    return spec


def resolve_schema(source: SchemaSource, resolve_model: ModelResolver, *, where: str) -> dict[str, Any] | bool:
    if not isinstance(source, str):
        return source
    try:
        return resolve_model(source)
    except InvalidSpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import or lookup failure names the field
        raise InvalidSpecError([_violation(where, f"cannot use model {source!r}: {exc}")]) from exc


def to_contracts(spec: PipelineSpec, resolve_model: ModelResolver) -> list[Contract]:
    """The steps as contracts, with ``"module:Model"`` references turned into JSON Schemas."""
    return [
        Contract(
            name=step.name,
            kind=step.kind,
            input_schema=resolve_schema(step.input_schema, resolve_model, where=f"$.steps[{i}].input_schema"),
            output_schema=resolve_schema(step.output_schema, resolve_model, where=f"$.steps[{i}].output_schema"),
            pre=list(step.pre),
            post=list(step.post),
        )
        for i, step in enumerate(spec.steps)
    ]


__all__ = [
    "parse_pipeline",
    "PipelineSpec",
    "StepSpec",
]
