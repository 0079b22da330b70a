"""JSON Schema helpers shared by the pre- and postconditions.

Three things every contract check needs, done once here:

- ``parse_json``: strict JSON (no ``NaN``/``Infinity``), never raising, so a
  hostile payload becomes an error message instead of a crash.
- ``schema_violations``: is this a JSON Schema? The metaschema of its declared
  draft (Draft 2020-12 by default) plus a pass that resolves every ``$ref``.
- ``instance_violations``: does a value validate? jsonschema's errors become
  ``Violation``s whose path points into the value (``$.arguments.city``).

No I/O: every validator gets an empty ``referencing.Registry``, which jsonschema
combines with the bundled metaschemas. Without it jsonschema would fetch remote
``$ref``s over HTTP; with it they are simply unresolvable.

Reports are capped at ``MAX_ERRORS`` per check and every message is cut to
``MAX_MESSAGE_CHARS``, so a hostile payload cannot produce megabytes of
violations (jsonschema messages quote the offending value).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import islice
from typing import Any

import jsonschema_specifications
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match, relevance
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from .violations import Phase, Violation, ViolationKind

MAX_ERRORS = 5
MAX_MESSAGE_CHARS = 400
_MAX_KEY_CHARS = 64
# jsonschema yields errors lazily; looking at a few more than we report lets
# the most relevant ones come first without walking a hostile payload fully.
_ERRORS_SCANNED = 50
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

PathPart = str | int


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_path(base: str, parts: Iterable[PathPart]) -> str:
    """Extend a JSON path: ``json_path("$.arguments", ["city", 0])`` is ``$.arguments.city[0]``."""
    out = [base]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENTIFIER.match(part):
            out.append(f".{clip(part, _MAX_KEY_CHARS)}")
        else:
            out.append(f"[{json.dumps(clip(str(part), _MAX_KEY_CHARS))}]")
    return "".join(out)


def describe(value: Any) -> str:
    """A short, safe rendering of a value for a message."""
    try:
        text = json.dumps(value, allow_nan=True, default=repr)
    except (ValueError, RecursionError, TypeError):
        text = type(value).__name__
    return clip(text, 80)


def json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class _NonFiniteNumber(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NonFiniteNumber(f"{name} is not valid JSON; use a finite number or null")


def parse_json(text: str) -> tuple[Any, str | None]:
    """Parse strict JSON; return ``(value, None)`` or ``(None, why it failed)``."""
    if not isinstance(text, str):
        return None, f"expected JSON text, got {type(text).__name__}"
    try:
        return json.loads(text, parse_constant=_reject_constant), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    except _NonFiniteNumber as exc:
        return None, f"invalid JSON: {exc}"
    except ValueError:  # Python refuses integers of more than 4300 digits
        return None, "invalid JSON: a number has too many digits"


def _schema_key(schema: Any) -> str | None:
    """Canonical text of a schema, the cache key; ``None`` when it is not JSON."""
    try:
        return json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _validator_class(schema: dict[str, Any]) -> type[Validator]:
    found: type[Validator] = validator_for(schema, default=Draft202012Validator)
    return found


def _message(error: ValidationError) -> str:
    """jsonschema's message, with a long quoted value cut so the rule it broke stays visible."""
    message: str = error.message
    if len(message) > 160:
        try:
            quoted = repr(error.instance)
        except RecursionError:
            return clip(message, 160)
        if len(quoted) > 80:
            message = message.replace(quoted, clip(quoted, 60))
    return message


def _ordered(errors: Iterator[ValidationError]) -> list[ValidationError]:
    """The most relevant errors first; ``best_match`` descends into anyOf/oneOf."""
    scanned = list(islice(errors, _ERRORS_SCANNED))
    try:
        scanned.sort(key=relevance, reverse=True)
    except TypeError:  # paths mixing keys and indexes at one level; keep jsonschema's order
        pass
    return [best_match([e]) or e for e in scanned[:MAX_ERRORS]]


_JSON_TYPES = "array, boolean, integer, null, number, object, string"


def _expected(error: ValidationError) -> str:
    keyword = error.validator
    if keyword == "anyOf" and list(error.absolute_schema_path)[-3:-1] == ["properties", "type"]:
        return f" (expected a JSON type name: {_JSON_TYPES})"
    if keyword in ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "then", "else"):
        return ""
    try:
        rule = json.dumps(error.validator_value, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        rule = repr(error.validator_value)
    return f" (schema rule: {keyword} = {clip(rule, 120)})"


# A problem is (path inside the checked document, message); cached by the
# schema's canonical text because the same tools are checked on every step.
Problem = tuple[tuple[PathPart, ...], str]


@lru_cache(maxsize=512)
def _schema_problems(key: str) -> tuple[Problem, ...]:
    schema = json.loads(key)
    try:
        cls = _validator_class(schema)
        meta = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER, registry=referencing.Registry())
        problems: list[Problem] = [
            (tuple(e.absolute_path), clip(f"{_message(e)}{_expected(e)}")) for e in _ordered(meta.iter_errors(schema))
        ]
        if problems:
            return tuple(problems)
        problems = _unresolvable_refs(schema, cls)
        if problems:
            return tuple(problems)
        # A $ref cycle that consumes no input (``{"$ref": "#"}``) recurses on
        # every value; one probe finds it before a model's answer does.
        try:
            next(iter(cls(schema, registry=referencing.Registry()).iter_errors({})), None)
        except RecursionError:
            return (((), "its $ref chain refers back to itself without descending into the value"),)
        return ()
    except RecursionError:
        return (((), "schema is nested too deeply to check"),)
    except Exception as exc:  # noqa: BLE001 - a hostile schema must become a violation, never a crash
        return (((), clip(f"schema cannot be checked: {type(exc).__name__}: {exc}")),)


def _unresolvable_refs(schema: dict[str, Any], cls: type[Validator]) -> list[Problem]:
    """Every ``$ref`` must resolve inside the schema or to a bundled metaschema."""
    dialect = schema.get("$schema") if isinstance(schema.get("$schema"), str) else None
    specification = referencing.jsonschema.specification_with(
        dialect or cls.META_SCHEMA["$schema"], default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(schema)
    resolver = jsonschema_specifications.REGISTRY.with_resource("", root).resolver_with_root(root)
    problems: list[Problem] = []
    pending = [(resolver, root)]
    while pending and len(problems) < MAX_ERRORS:
        current, resource = pending.pop()
        ref = resource.contents.get("$ref") if isinstance(resource.contents, dict) else None
        if isinstance(ref, str):
            try:
                current.lookup(ref)
            except referencing.exceptions.Unresolvable:
                reason = f"$ref {ref!r} cannot be resolved; refer to a definition inside the schema"
                problems.append(((), clip(reason)))
        pending.extend((current.in_subresource(sub), sub) for sub in resource.subresources())
    return problems


def schema_violations(
    schema: Any,
    *,
    contract: str,
    phase: Phase,
    kind: ViolationKind,
    path: str,
    what: str = "schema",
    require_object: bool = False,
) -> list[Violation]:
    """Violations if ``schema`` is not a valid JSON Schema (or not an object schema when required)."""

    def violation(at: str, message: str) -> Violation:
        return Violation(contract=contract, phase=phase, kind=kind, path=at, message=clip(message))

    if not isinstance(schema, dict):
        return [violation(path, f"{what} must be a JSON object, got {json_type_name(schema)} {describe(schema)}")]
    key = _schema_key(schema)
    if key is None:
        reason = "it holds NaN, Infinity or non-JSON values, or nests too deeply"
        return [violation(path, f"{what} is not JSON ({reason})")]
    out = [
        violation(json_path(path, parts), f"{what} is not valid JSON Schema: {message}")
        for parts, message in _schema_problems(key)
    ]
    if require_object and not out and schema.get("type") != "object":
        out.append(
            violation(
                json_path(path, ["type"]),
                f'{what} must describe a JSON object: expected "type": "object", got {describe(schema.get("type"))}',
            )
        )
    return out


@lru_cache(maxsize=512)
def _compiled(key: str) -> Validator:
    schema = json.loads(key)
    return _validator_class(schema)(schema, registry=referencing.Registry())


def instance_violations(
    instance: Any,
    schema: dict[str, Any],
    *,
    contract: str,
    phase: Phase,
    kind: ViolationKind,
    path: str,
    what: str = "value",
) -> list[Violation]:
    """Violations of ``instance`` against ``schema``, each with a path into the instance.

    A broken schema (unresolvable ``$ref``, endless recursion) is reported as a
    violation of the same kind rather than raised: checks never crash.
    """

    def violation(at: str, message: str) -> Violation:
        return Violation(contract=contract, phase=phase, kind=kind, path=at, message=clip(message))

    key = _schema_key(schema) if isinstance(schema, dict) else None
    if key is None:
        return [violation(path, f"cannot check {what}: its schema is not a JSON object")]
    try:
        errors = _ordered(_compiled(key).iter_errors(instance))
    except RecursionError:
        return [violation(path, f"cannot check {what}: it is nested too deeply to validate")]
    except referencing.exceptions.Unresolvable as exc:
        reason = f"its schema has a $ref that cannot be resolved: {clip(str(exc), 120)}"
        return [violation(path, f"cannot check {what}: {reason}")]
    except Exception as exc:  # noqa: BLE001 - e.g. a bad regex in an unchecked schema; never crash
        reason = f"its schema cannot be applied: {type(exc).__name__}: {clip(str(exc), 120)}"
        return [violation(path, f"cannot check {what}: {reason}")]
    return [violation(json_path(path, e.absolute_path), f"invalid {what}: {_message(e)}{_expected(e)}") for e in errors]
