"""Counterfactual replay: recorded runs' inputs under a new model or prompt, their tools answered from the record.

Each source run's history holds its input, its result, the tool schemas it
was given (``tools.describe``) and every tool call with its result
(``tools.call``). A replay is an ordinary new ``AgentWorkflow`` run with the
new spec, on a private task queue served by a worker whose only tool source is
``activities/tools/recorded.RecordedTools``: a call that matches a recorded one (tool and canonical
arguments, ``contracts/llm/arguments.canonical_arguments``, as effect keys) gets the recorded
result, and any other call is refused unexecuted and reported, unless
``allow_tools`` names it as read-only (then it runs live). No tool of the
source run is ever executed again. Both runs are then scored by what
the engine itself recorded: status, output, violations, steps, tokens, cost.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHistory
from temporalio.converter import DataConverter

from ..contracts import (
    AgentInput,
    AgentResult,
    AgentSpec,
    InvalidSpecError,
    LLMConfig,
    LLMResponse,
    ToolCallInput,
    ToolCallResult,
    ToolSchema,
    Usage,
)
from ..contracts.llm.arguments import canonical_arguments
from ..contracts.names import AGENT_WORKFLOW, LLM_CALL_PLAN_FIRST, LLM_CALL_RESOLVING_TOOLS, TOOLS_CALL, TOOLS_DESCRIBE
from ..contracts.quotas.plan import PlanFirstAnswer
from .replay_check import fetch_history, workflow_type
from .search_attributes import run_start_attributes

Cost = Callable[[str, Usage], float]
"""The price of one step's usage on a model (the worker's price table)."""


class AnsweredTools(Protocol):
    """What the replay worker's tool source saw, per replay run (``activities/tools/recorded.py``)."""

    # Read-only here: the tool source records, the scorer only reads.
    @property
    def answered(self) -> Mapping[str, list[tuple[str, str]]]: ...
    @property
    def refused(self) -> Mapping[str, list[tuple[str, str]]]: ...
    @property
    def live_calls(self) -> Mapping[str, list[tuple[str, str]]]: ...

    def add(
        self, replay_id: str, schemas: Sequence[ToolSchema], calls: Sequence[tuple[str, str, ToolCallResult]]
    ) -> None: ...


@dataclass
class RecordedRun:
    """What a source run's history says it was given, called and answered."""

    workflow_id: str
    inp: AgentInput
    result: AgentResult | None
    schemas: list[ToolSchema]
    calls: list[tuple[str, str, ToolCallResult]]
    """(tool, canonical arguments, result) in the order the results arrived."""


async def _decode(converter: DataConverter, payloads: Any, hint: type) -> Any:
    values = await converter.decode(list(payloads.payloads), [hint])
    return values[0] if values else None


async def read_recorded_run(history: WorkflowHistory, converter: DataConverter) -> RecordedRun:
    """The run's input, result and tool calls, decoded with the worker's converter (payload store included)."""
    if workflow_type(history) != AGENT_WORKFLOW:
        raise ValueError(f"{history.workflow_id} is a {workflow_type(history)}, not an {AGENT_WORKFLOW} run")
    started = history.events[0].workflow_execution_started_event_attributes
    inp = await _decode(converter, started.input, AgentInput)
    scheduled: dict[int, tuple[str, ToolCallInput | None]] = {}
    schemas: list[ToolSchema] = []
    calls: list[tuple[str, str, ToolCallResult]] = []
    result: AgentResult | None = None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            sched = event.activity_task_scheduled_event_attributes
            if sched.activity_type.name == TOOLS_CALL:
                scheduled[event.event_id] = (TOOLS_CALL, await _decode(converter, sched.input, ToolCallInput))
            elif sched.activity_type.name in (TOOLS_DESCRIBE, LLM_CALL_RESOLVING_TOOLS, LLM_CALL_PLAN_FIRST):
                # The run's tool schemas: described, or (a one-shot tool-mode run) resolved by its first model call.
                scheduled[event.event_id] = (sched.activity_type.name, None)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            kind, call = scheduled.get(attrs.scheduled_event_id, ("", None))
            if kind == TOOLS_CALL and call is not None:
                answer = await _decode(converter, attrs.result, ToolCallResult)
                calls.append((call.name, canonical_arguments(call.arguments), answer))
            elif kind == TOOLS_DESCRIBE:
                schemas.extend(await _decode(converter, attrs.result, list[ToolSchema]))
            elif kind == LLM_CALL_RESOLVING_TOOLS:
                response: LLMResponse = await _decode(converter, attrs.result, LLMResponse)
                schemas.extend(response.tools or [])
            elif kind == LLM_CALL_PLAN_FIRST:
                # The call was made (the worker had no quota plan) or the plan came back and the next call resolves.
                first: PlanFirstAnswer = await _decode(converter, attrs.result, PlanFirstAnswer)
                schemas.extend(first.response.tools or [] if first.response is not None else [])
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            result = await _decode(converter, event.workflow_execution_completed_event_attributes.result, AgentResult)
    return RecordedRun(history.workflow_id, inp, result, schemas, calls)


@dataclass
class RunScore:
    """One recorded run beside its replay."""

    source_id: str
    replay_id: str
    status: tuple[str, str]
    same_output: bool
    output: tuple[Any, Any]
    steps: tuple[int, int]
    tokens: tuple[int, int]
    cost_usd: tuple[float, float]
    violations: tuple[int, int]
    reprompts: tuple[int, int]
    degradations: tuple[int, int]
    tool_calls_only_in_source: list[str] = field(default_factory=list)
    tool_calls_only_in_replay: list[str] = field(default_factory=list)
    answered_from_record: int = 0
    not_executed: list[str] = field(default_factory=list)
    ran_live: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def differs(self) -> bool:
        return not self.same_output or self.status[0] != self.status[1] or bool(self.not_executed)


def _tokens(result: AgentResult | None) -> int:
    return (
        0
        if result is None
        else result.usage.total_tokens or (result.usage.prompt_tokens + result.usage.completion_tokens)
    )


def _cost(result: AgentResult | None, cost: Cost) -> float:
    return 0.0 if result is None else round(sum(cost(s.model, s.usage) for s in result.steps), 6)


def _calls(result: AgentResult | None) -> list[str]:
    if result is None:
        return []
    return [f"{c.name}({canonical_arguments(c.arguments)})" for s in result.steps for c in s.tool_calls]


def _reprompts(result: AgentResult | None) -> int:
    """Steps whose answer broke a contract and was answered again (the ladder's first rung)."""
    return 0 if result is None else sum(1 for s in result.steps if s.violations)


def _multiset_minus(a: list[str], b: list[str]) -> list[str]:
    rest = list(b)
    out = []
    for item in a:
        if item in rest:
            rest.remove(item)
        else:
            out.append(item)
    return out


def score(
    source: RecordedRun,
    replay_id: str,
    replay: AgentResult | None,
    tools: AnsweredTools,
    cost: Cost,
    error: str | None = None,
) -> RunScore:
    before, after = source.result, replay
    status = (before.status if before else "failed", after.status if after else "failed")
    same = (
        before is not None
        and after is not None
        and json.dumps(before.output, sort_keys=True) == json.dumps(after.output, sort_keys=True)
    )
    src_calls, new_calls = _calls(before), _calls(after)
    return RunScore(
        source_id=source.workflow_id,
        replay_id=replay_id,
        status=status,
        same_output=same,
        output=(before.output if before else None, after.output if after else None),
        steps=(len(before.steps) if before else 0, len(after.steps) if after else 0),
        tokens=(_tokens(before), _tokens(after)),
        cost_usd=(_cost(before, cost), _cost(after, cost)),
        violations=(len(before.violations) if before else 0, len(after.violations) if after else 0),
        reprompts=(_reprompts(before), _reprompts(after)),
        degradations=(len(before.degradations) if before else 0, len(after.degradations) if after else 0),
        tool_calls_only_in_source=_multiset_minus(src_calls, new_calls),
        tool_calls_only_in_replay=_multiset_minus(new_calls, src_calls),
        answered_from_record=len(tools.answered.get(replay_id, [])),
        not_executed=[f"{n}({a})" for n, a in tools.refused.get(replay_id, [])],
        ran_live=[f"{n}({a})" for n, a in tools.live_calls.get(replay_id, [])],
        error=error,
    )


def new_spec(recorded: AgentSpec, spec: AgentSpec | None, model: str | None) -> AgentSpec:
    """The spec a replay runs with: a whole new spec, or the recorded one with another ``PROVIDER:MODEL``."""
    base = spec or recorded
    if model:
        provider, _, name = model.partition(":")
        if not name:
            provider, name = base.model.provider, provider
        try:
            config = LLMConfig.model_validate({**base.model.model_dump(), "provider": provider, "model": name})
        except ValidationError as exc:
            raise InvalidSpecError.from_validation(exc, "model") from None
        base = base.model_copy(update={"model": config})
    return base


async def replay_runs(
    client: Client,
    sources: Sequence[RecordedRun],
    *,
    task_queue: str,
    tools: AnsweredTools,
    spec: AgentSpec | None,
    model: str | None,
    cost: Cost,
) -> list[RunScore]:
    """Start one replay per source run (all at once) on ``task_queue`` and score each against its source."""
    handles = []
    for source in sources:
        replay_id = f"replay-{source.workflow_id}-{uuid.uuid4().hex[:8]}"
        tools.add(replay_id, source.schemas, source.calls)
        inp = AgentInput(spec=new_spec(source.inp.spec, spec, model), input=source.inp.input)
        handles.append(
            (
                source,
                replay_id,
                await client.start_workflow(
                    AGENT_WORKFLOW,
                    inp,
                    id=replay_id,
                    task_queue=task_queue,
                    search_attributes=run_start_attributes(inp.spec, inp.tenant),
                    result_type=AgentResult,
                ),
            )
        )
    scores = []
    for source, replay_id, handle in handles:
        try:
            result, error = await handle.result(), None
        except WorkflowFailureError as exc:
            result, error = None, str(exc.cause or exc)
        scores.append(score(source, replay_id, result, tools, cost, error))
    return scores


async def load_sources(client: Client, workflow_ids: Sequence[str], converter: DataConverter) -> list[RecordedRun]:
    return [await read_recorded_run(await fetch_history(client, wid), converter) for wid in workflow_ids]


def _pct(before: float, after: float) -> str:
    if before == 0:
        return "n/a"
    return f"{(after - before) / before * 100:+.0f}%"


def summary(scores: Sequence[RunScore]) -> dict[str, Any]:
    tokens = [sum(s.tokens[i] for s in scores) for i in (0, 1)]
    cost = [round(sum(s.cost_usd[i] for s in scores), 6) for i in (0, 1)]
    return {
        "runs": len(scores),
        "same_answer": sum(s.same_output for s in scores),
        "differ": sum(s.differs for s in scores),
        "completed": [sum(s.status[i].startswith("completed") for s in scores) for i in (0, 1)],
        "tokens": tokens,
        "tokens_change": _pct(*tokens),
        "cost_usd": cost,
        "cost_change": _pct(*cost),
        "answered_from_record": sum(s.answered_from_record for s in scores),
        "not_executed_calls": sum(len(s.not_executed) for s in scores),
        "live_calls": sum(len(s.ran_live) for s in scores),
    }


def render(scores: Sequence[RunScore]) -> str:
    width = max([len("RUN"), *(len(s.source_id) for s in scores)])
    lines = [f"{'RUN':<{width}}  {'STATUS':<23}  {'ANSWER':<7}  {'STEPS':<6}  {'TOKENS':<11}  {'VIOL':<5}  TOOL CALLS"]
    for s in scores:
        status = s.status[0] if s.status[0] == s.status[1] else f"{s.status[0]}->{s.status[1]}"
        tool_note = (
            "same"
            if not (s.tool_calls_only_in_source or s.tool_calls_only_in_replay)
            else (f"-{len(s.tool_calls_only_in_source)} +{len(s.tool_calls_only_in_replay)}")
        )
        if s.not_executed:
            tool_note += f", {len(s.not_executed)} not executed"
        lines.append(
            f"{s.source_id:<{width}}  {status:<23}  {'same' if s.same_output else 'DIFFERS':<7}  "
            f"{s.steps[0]}->{s.steps[1]:<3}  {s.tokens[0]}->{s.tokens[1]:<5}  "
            f"{s.violations[0]}->{s.violations[1]:<2}  {tool_note}"
        )
        for call in s.not_executed:
            lines.append(f"    not executed (no recorded match): {call}")
        if not s.same_output:
            lines.append(f"    recorded: {json.dumps(s.output[0])[:120]}")
            lines.append(f"    replayed: {json.dumps(s.output[1])[:120]}")
        if s.error:
            lines.append(f"    replay failed: {s.error[:200]}")
    total = summary(scores)
    lines.append(
        f"{total['runs']} runs: {total['same_answer']} same answer, {total['runs'] - total['same_answer']} differ; "
        f"tokens {total['tokens_change']}; cost {total['cost_change']}; "
        f"{total['not_executed_calls']} tool calls not executed"
    )
    return "\n".join(lines)


def report_json(scores: Sequence[RunScore]) -> dict[str, Any]:
    """The ``--json`` body; the CLI names its shape (``cli/json_output.COUNTERFACTUAL``)."""
    return {
        "summary": summary(scores),
        "runs": [{**asdict(s), "differs": s.differs} for s in scores],
    }


__all__ = [
    "AnsweredTools",
    "RecordedRun",
    "RunScore",
    "load_sources",
    "read_recorded_run",
    "render",
    "replay_runs",
    "report_json",
    "score",
    "summary",
    "new_spec",
]
