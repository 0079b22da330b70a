"""PipelineWorkflow: runs a composed pipeline ``C1 ; C2 ; ... ; Cn``.

The composition is re-checked first (pure, deterministic): a refuted or
unacknowledged unproven edge fails the run before any step. Then each step is
one activity: LLM steps call ``llm.call`` with their output schema as the JSON
response format, tool steps call ``tools.call``. After each step the value is
checked against the step's Post and the next step's Pre (schema and
predicates) -- the edge -- and violations are handled as in AgentWorkflow:
re-prompt (LLM steps), then the fallback models, then the default result,
then a typed ``ContractViolationError`` naming the edge and the violation.
"""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import (
        LLMConfig,
        LLMRequest,
        LLMResponse,
        Message,
        ResponseFormat,
        ToolSchema,
        Violation,
        ViolationKind,
    )
    from ..contracts.composition.contract import CompositionError, ContractKind, compose, edge_name
    from ..contracts.composition.pipeline_run import EdgeCheck, PipelineInput, PipelineResult, PipelineStep, StepRecord
    from ..contracts.composition.predicates import predicate_violations
    from ..contracts.errors import InvalidSpecError
    from ..contracts.json_schema import instance_violations, parse_json
    from ..contracts.names import LLM_CALL, PIPELINE_WORKFLOW, TOOLS_CALL
    from ..contracts.persisted_ids import pipeline_call_key, step_scope
    from ..failures import to_application_error
    from ..telemetry import workflow_metrics
    from .calls import call_llm, call_tool, describe_tools
    from .effects import effect_key, run_chain
    from .entries import NO_INPUT, start_input
    from .ladder import Decision, Rung, ViolationLadder, retry_history, violation_error
    from .releases.gates import effects_once

JSON_INSTRUCTION = "Answer with one JSON value that matches the response schema; no prose."


def _invalid(message: str) -> ApplicationError:
    return to_application_error(InvalidSpecError.with_message(message))


@workflow.defn(name=PIPELINE_WORKFLOW)
class PipelineWorkflow:
    def __init__(self) -> None:
        self._result = PipelineResult(status="completed")
        self._tools: dict[str, ToolSchema] | None = None

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> PipelineResult:
        inp = start_input(raw, PipelineInput)
        with_delivery = effects_once()  # asked before anything can fail, as always
        self._compose(inp)
        steps = inp.steps
        if with_delivery:
            # Each tool's delivery policy decides how its step may be retried.
            names = sorted({s.tool or s.contract.name for s in steps if s.contract.kind is ContractKind.tool})
            described = await describe_tools(names, inp.tool_policy) if names else []
            self._tools = {t.name: t for t in described}
        value = inp.input
        first = steps[0].contract
        self._edge_or_fail(
            edge_name("input", first.name),
            1,
            value,
            checks=self._pre_checks(steps[0]),
            violations=self._pre_violations(steps[0], value),
            contract=first.name,
        )
        for i, step in enumerate(steps):
            following = steps[i + 1] if i + 1 < len(steps) else None
            if step.contract.kind in (ContractKind.llm, ContractKind.llm_final):
                value = await self._llm_step(inp, i, step, following, value)
            else:
                value = await self._tool_step(inp, i, step, following, value)
        self._result.output = value
        return self._result

    # --- composition -------------------------------------------------------------

    def _compose(self, inp: PipelineInput) -> None:
        if not inp.steps:
            raise _invalid("a pipeline needs at least one step")
        for i, s in enumerate(inp.steps):
            if s.contract.kind is ContractKind.code:
                raise _invalid(f"$.steps[{i}]: code steps are not runnable in pipelines yet")
            if s.contract.kind is not ContractKind.tool and s.model is None:
                raise _invalid(f"$.steps[{i}].model: LLM step {s.contract.name!r} has no model")
        try:
            compose(*(s.contract for s in inp.steps), acknowledged_unproven=inp.acknowledge_unproven, name=inp.name)
        except CompositionError as exc:
            raise to_application_error(exc, *[e.model_dump(mode="json") for e in exc.edges]) from None
        except InvalidSpecError as exc:
            raise to_application_error(exc, *[v.model_dump(mode="json") for v in exc.violations]) from None

    # --- edge checks ----------------------------------------------------------------

    @staticmethod
    def _pre_checks(step: PipelineStep) -> list[str]:
        return [f"schema pre {step.contract.name}", *(f"pre {step.contract.name}: {p}" for p in step.contract.pre)]

    @staticmethod
    def _pre_violations(step: PipelineStep, value: Any) -> list[Violation]:
        c = step.contract
        out: list[Violation] = []
        if isinstance(c.input_schema, dict):
            out += instance_violations(
                value,
                c.input_schema,
                contract=c.name,
                phase="pre",
                kind=ViolationKind.tool_arguments_invalid
                if c.kind is ContractKind.tool
                else ViolationKind.predicate_failed,
                path="$",
                what=f"the input of {c.name}",
            )
        return out + predicate_violations(c.pre, value, contract=c.name, phase="pre")

    def _edge(
        self, step: PipelineStep, following: PipelineStep | None, value: Any, attempt: int, kind: ViolationKind
    ) -> list[Violation]:
        """Post of ``step`` and Pre of the next step on ``value``; recorded on the result."""
        c = step.contract
        checks = [f"schema post {c.name}", *(f"post {c.name}: {p}" for p in c.post)]
        violations: list[Violation] = []
        if isinstance(c.output_schema, dict):
            violations += instance_violations(
                value,
                c.output_schema,
                contract=c.name,
                phase="post",
                kind=kind,
                path="$",
                what=f"the output of {c.name}",
            )
        violations += predicate_violations(c.post, value, contract=c.name, phase="post")
        workflow_metrics.record_check(c.name, "post", violations)
        if following is not None:
            checks += self._pre_checks(following)
            pre = self._pre_violations(following, value)
            workflow_metrics.record_check(following.contract.name, "pre", pre)
            violations += pre
        target = following.contract.name if following else "output"
        self._result.edges.append(
            EdgeCheck(edge=edge_name(c.name, target), attempt=attempt, checks=checks, violations=violations)
        )
        return violations

    def _edge_or_fail(
        self, edge: str, attempt: int, value: Any, *, checks: list[str], violations: list[Violation], contract: str
    ) -> None:
        workflow_metrics.record_check(contract, "pre", violations)
        self._result.edges.append(EdgeCheck(edge=edge, attempt=attempt, checks=checks, violations=violations))
        if violations:
            raise violation_error(violations[0], edge=edge)

    # --- LLM steps ----------------------------------------------------------------------

    async def _llm_step(
        self, inp: PipelineInput, index: int, step: PipelineStep, following: PipelineStep | None, value: Any
    ) -> Any:
        c = step.contract
        assert step.model is not None
        ladder = ViolationLadder([step.model, *step.fallback_models], step.reprompt_budget, step.default_result)
        system = f"{step.prompt}\n\n{JSON_INSTRUCTION}".strip()
        start = [Message.system(system), Message.user(json.dumps(value, sort_keys=True))]
        history = list(start)
        schema = c.output_schema if isinstance(c.output_schema, dict) and c.output_schema else None
        response_format = ResponseFormat(name=c.name, json_schema=schema) if schema else None
        target = following.contract.name if following else "output"
        attempt = 0
        while True:
            attempt += 1
            response = await self._call_llm(inp, ladder.current, history, response_format)
            violations = list(response.violations)
            output: Any = None
            if not violations:
                output, problem = parse_json(response.message.content or "")
                if problem is not None:
                    violations = [
                        Violation(
                            contract=c.name,
                            phase="post",
                            kind=ViolationKind.response_not_json,
                            path="$",
                            message=problem,
                        )
                    ]
                    workflow_metrics.record_check(c.name, "post", violations)
                else:
                    violations = self._edge(step, following, output, attempt, ViolationKind.response_schema_mismatch)
            else:
                self._result.edges.append(
                    EdgeCheck(
                        edge=edge_name(c.name, target),
                        attempt=attempt,
                        checks=[f"{LLM_CALL} postconditions"],
                        violations=violations,
                    )
                )
            if not violations:
                self._record(step, attempt, response.model or ladder.current.model, output)
                return output
            decision = ladder.step(violations)
            if decision.rung is Rung.default:
                return self._use_default(index, step, following, decision, attempt)
            if decision.rung is Rung.fail:
                raise violation_error(decision.reason, edge=edge_name(c.name, target))
            if decision.rung is Rung.fallback:
                self._result.degradations.append(decision.degradation(index))
            following_history = retry_history(decision, history, start, response.message, violations)
            assert following_history is not None, "the default and fail rungs returned above"
            history = following_history

    async def _call_llm(
        self, inp: PipelineInput, config: LLMConfig, messages: list[Message], response_format: ResponseFormat | None
    ) -> LLMResponse:
        request = LLMRequest(config=config, messages=messages, tool_choice="none", response_format=response_format)
        return await call_llm(request, inp.llm_policy, self._result)

    # --- tool steps -----------------------------------------------------------------------

    async def _tool_step(
        self, inp: PipelineInput, index: int, step: PipelineStep, following: PipelineStep | None, value: Any
    ) -> Any:
        c = step.contract
        name = step.tool or c.name
        arguments = json.dumps(value)
        if self._tools is None:
            key, delivery = pipeline_call_key(workflow.info().run_id, index, c.name), None
        else:
            # Names the effect (step and content), not the run: it survives a reset.
            schema = self._tools.get(name)
            key, delivery = (
                effect_key(run_chain(), step_scope(index), name, arguments, 0),
                schema.delivery if schema else None,
            )
        result = await call_tool(
            name, arguments, call_id=f"{c.name}", key=key, policy=inp.tool_policy, delivery=delivery
        )
        target = following.contract.name if following else "output"
        if result.is_error:
            violations = [
                Violation(
                    contract=c.name,
                    phase="post",
                    kind=ViolationKind.tool_output_invalid,
                    path="$",
                    message=result.content,
                )
            ]
            workflow_metrics.record_check(c.name, "post", violations)
            self._result.edges.append(
                EdgeCheck(edge=edge_name(c.name, target), attempt=1, checks=[TOOLS_CALL], violations=violations)
            )
        else:
            output = result.structured
            if output is None:
                output, _ = parse_json(result.content)
            violations = self._edge(step, following, output, 1, ViolationKind.tool_output_invalid)
            if not violations:
                self._record(step, 1, "", output)
                return output
        # A tool cannot be re-prompted and has no model: its only rung is the default result.
        decision = ViolationLadder([], 0, step.default_result).step(violations, source=name)
        if decision.rung is Rung.default:
            return self._use_default(index, step, following, decision, 1)
        raise violation_error(decision.reason, edge=edge_name(c.name, target))

    # --- bookkeeping ---------------------------------------------------------------------------

    def _use_default(
        self, index: int, step: PipelineStep, following: PipelineStep | None, decision: Decision, attempt: int
    ) -> Any:
        assert step.default_result is not None
        value = step.default_result.value
        self._result.degradations.append(decision.degradation(index))
        self._result.status = "completed_with_default"
        # A default is still a value crossing the edge: it must meet the same checks.
        violations = self._edge(step, following, value, attempt + 1, decision.reason.kind)
        if violations:
            target = following.contract.name if following else "output"
            raise violation_error(violations[0], edge=edge_name(step.contract.name, target))
        self._record(step, attempt, decision.to, value, defaulted=True)
        return value

    def _record(self, step: PipelineStep, attempts: int, model: str, output: Any, *, defaulted: bool = False) -> None:
        self._result.steps.append(
            StepRecord(
                name=step.contract.name,
                kind=step.contract.kind.value,
                attempts=attempts,
                model=model,
                output=output,
                defaulted=defaulted,
            )
        )
