"""The spec's own contract (``agent_spec``): an AgentSpec checked before a run starts.

The static part of ``llm.call``'s Pre that can be decided from the spec alone
(model configs, the tools it names, its output schema and default result, its
budgets); paths name the spec field (``$.model.temperature``). A non-empty
result means the run is refused before it starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .json_schema import clip, describe, instance_violations, schema_violations
from .llm.preconditions import check_config, check_tool_schemas, pre_violation
from .llm.tools import ToolSchema
from .spec import AgentSpec
from .violations import Violation, ViolationKind

SPEC_CONTRACT = "agent_spec"

_K = ViolationKind


def check_spec(
    spec: AgentSpec, known_tools: Mapping[str, ToolSchema] | None, *, whole_catalog: bool = True
) -> list[Violation]:
    """Static checks before a run starts; paths name the spec field (``$.model.temperature``).

    ``known_tools`` None leaves the tools to ``check_spec_tools``, where they are resolved
    (the ``llm.call`` that resolves a run's tool names).
    """
    aliases = spec.allowed_model_aliases
    out = check_config(spec.model, aliases, "$.model", SPEC_CONTRACT)
    for i, fallback in enumerate(spec.fallback_models):
        out += check_config(fallback, aliases, f"$.fallback_models[{i}]", SPEC_CONTRACT)
    if known_tools is not None:
        out += check_spec_tools(spec.tools, known_tools, whole_catalog=whole_catalog)
    out += _check_rest(spec)
    return out


UNKNOWN_TO_THE_WORKER = (
    "no worker on this task queue offers it (`agentsteps tools list` with the worker's config shows what it offers)"
)


def check_spec_tools(
    names: Sequence[str], known_tools: Mapping[str, ToolSchema], *, whole_catalog: bool = True
) -> list[Violation]:
    """The spec's tools: each registered, each schema usable; paths ``$.tools[i]``.

    ``whole_catalog`` False: ``known_tools`` are only those of ``names`` the worker found (``tools.describe``
    answers for the names asked), so listing them as "known tools" would be false; the message says where
    to look instead."""
    out: list[Violation] = []
    available = ", ".join(sorted(known_tools)) or "none"
    for i, name in enumerate(names):
        at = f"$.tools[{i}]"
        tool = known_tools.get(name)
        if tool is None:
            where = f"known tools: {clip(available, 200)}" if whole_catalog else UNKNOWN_TO_THE_WORKER
            out.append(
                pre_violation(
                    _K.unknown_tool_in_spec, at, f"tool {describe(name)} is not registered; {where}", SPEC_CONTRACT
                )
            )
            continue
        for v in check_tool_schemas([tool], contract=SPEC_CONTRACT):
            # Point at the spec's entry; the tool's own field stays in the message.
            inner = v.path.removeprefix("$.tools[0]")
            out.append(v.model_copy(update={"path": at, "message": clip(f"{inner.lstrip('.')}: {v.message}")}))
    return out


def _check_rest(spec: AgentSpec) -> list[Violation]:
    out: list[Violation] = []
    if spec.output_schema is not None:
        schema_problems = schema_violations(
            spec.output_schema,
            contract=SPEC_CONTRACT,
            phase="pre",
            kind=_K.invalid_output_schema,
            path="$.output_schema",
            what="output_schema",
        )
        out += schema_problems
        if not schema_problems and spec.default_result is not None:
            # The default stands in for a final answer, so it must honour the same schema.
            out += instance_violations(
                spec.default_result.value,
                spec.output_schema,
                contract=SPEC_CONTRACT,
                phase="pre",
                kind=_K.response_schema_mismatch,
                path="$.default_result.value",
                what="default_result.value",
            )

    for field, value, minimum in (
        ("max_steps", spec.max_steps, 1),
        ("reprompt_budget", spec.reprompt_budget, 0),
        ("token_budget", spec.token_budget, 1),
    ):
        if not (isinstance(value, int) and value >= minimum):
            out.append(
                pre_violation(
                    _K.invalid_budget,
                    f"$.{field}",
                    f"{field} is {describe(value)}; it must be an integer of at least {minimum}",
                    SPEC_CONTRACT,
                )
            )
    return out


__all__ = ["SPEC_CONTRACT", "check_spec", "check_spec_tools"]
