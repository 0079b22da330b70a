"""The prover's entry points: validate both schemas, then decide the edge."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidSpecError
from ...json_schema import clip, describe, schema_violations
from ...violations import ViolationKind
from .results import CompatResult, Counterexample, Verdict
from .subset import _Checker
from .vocabulary import _SUPPORTED_DIALECTS


def ensure_schema(schema: Any, *, where: str) -> None:
    """Raise ``InvalidSpecError`` naming ``where`` unless ``schema`` is a valid JSON Schema."""
    if schema is True or schema is False:
        return
    problems = schema_violations(
        schema,
        contract="pipeline",
        phase="pre",
        kind=ViolationKind.invalid_output_schema,
        path=where,
    )
    if problems:
        raise InvalidSpecError(problems)


def check_schema_compat(output_schema: Any, input_schema: Any) -> CompatResult:
    """Does every value valid against ``output_schema`` validate against ``input_schema``?

    Raises ``InvalidSpecError`` when either is not a valid JSON Schema.
    """
    ensure_schema(output_schema, where="$.output_schema")
    ensure_schema(input_schema, where="$.input_schema")
    for name, schema in (("output", output_schema), ("input", input_schema)):
        if isinstance(schema, dict) and "$schema" in schema and schema["$schema"] not in _SUPPORTED_DIALECTS:
            return CompatResult(
                verdict=Verdict.unproven,
                reason=f"the {name} schema's dialect {schema['$schema']!r} is not modelled (use Draft 2020-12)",
            )
    checker = _Checker(output_schema, input_schema)
    try:
        r = checker.sub(output_schema, input_schema, "$", (), (), 0)
    except RecursionError:
        return CompatResult(verdict=Verdict.unproven, reason="schemas nest too deeply to analyse")
    if r.verdict is Verdict.refuted:
        # The root-level check is the one that counts: same $ref resolution as at run time.
        if checker.a.valid(output_schema, r.value, strict=True) is True and (
            checker.b.valid(input_schema, r.value, strict=False) is False
        ):
            return CompatResult(
                verdict=Verdict.refuted, reason=r.reason, path=r.path, counterexample=Counterexample(value=r.value)
            )
        return CompatResult(
            verdict=Verdict.unproven,
            path=r.path,
            reason=clip(f"{r.reason} (a candidate counterexample {describe(r.value)} did not check out)"),
        )
    return CompatResult(verdict=r.verdict, reason=r.reason, path=r.path)
