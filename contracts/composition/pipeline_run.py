"""PipelineWorkflow's input and result types.

The client resolves a pipeline file (``"module:Model"`` references included)
into ``PipelineInput`` before starting the run, so the workflow never imports
user modules and a backend in any language can start one by name.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ..llm.request import LLMConfig, Usage
from ..spec import ActivityPolicy, DefaultResult, Degradation
from ..violations import Violation
from .contract import Contract
from .pipeline_spec import PipelineSpec


class PipelineStep(BaseModel):
    contract: Contract
    prompt: str = ""
    tool: str | None = None
    model: LLMConfig | None = None
    reprompt_budget: int = 2
    fallback_models: list[LLMConfig] = Field(default_factory=list)
    default_result: DefaultResult | None = None


class PipelineInput(BaseModel):
    name: str
    steps: list[PipelineStep]
    acknowledge_unproven: list[str] = Field(default_factory=list)
    input: Any = None
    """The value entering the first step; checked against its input schema and Pre."""
    llm_policy: ActivityPolicy = Field(default_factory=ActivityPolicy)
    tool_policy: ActivityPolicy = Field(default_factory=lambda: ActivityPolicy(start_to_close_seconds=60.0))


class EdgeCheck(BaseModel):
    """The run-time checks of one edge on one value; ``input->a`` and ``z->output`` bracket the pipeline."""

    edge: str
    attempt: int
    checks: list[str]
    """What was checked, e.g. ``schema post read_email``, ``pre reply: non_empty``."""
    violations: list[Violation] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


class StepRecord(BaseModel):
    name: str
    kind: str
    attempts: int
    model: str = ""
    output: Any = None
    defaulted: bool = False


PipelineStatus = Literal["completed", "completed_with_default"]


class PipelineResult(BaseModel):
    status: PipelineStatus
    output: Any = None
    steps: list[StepRecord] = Field(default_factory=list)
    edges: list[EdgeCheck] = Field(default_factory=list)
    degradations: list[Degradation] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


def pipeline_input(spec: PipelineSpec, contracts: list[Contract], value: Any) -> PipelineInput:
    """Join a parsed spec with its resolved contracts (see ``client.pipeline_files.load_pipeline_file``)."""
    return PipelineInput(
        name=spec.name,
        acknowledge_unproven=list(spec.acknowledge_unproven),
        input=value,
        steps=[
            PipelineStep(
                contract=c,
                prompt=s.prompt,
                tool=s.tool,
                model=s.model or spec.model,
                reprompt_budget=s.reprompt_budget,
                fallback_models=list(s.fallback_models),
                default_result=s.default_result,
            )
            for s, c in zip(spec.steps, contracts)
        ],
    )
