"""Named runtime predicates: what a JSON Schema cannot say.

A contract lists predicates by name in its Pre or Post. They are never
"proven" by composition: each is checked at run time on the value crossing the
edge. A predicate takes the value and returns ``None`` when it holds, or a
message written for the model when it does not.

Plain names live in ``PREDICATES``. Parametrised ones are written
``name:argument`` and built by ``PARAMETRISED[name](argument)``:

- ``usage_consistent``: ``usage.total_tokens == prompt_tokens + completion_tokens``
  (on a usage object, or on a value with a ``usage`` field).
- ``non_empty``: not ``null``, ``""``, ``[]`` or ``{}``.
- ``has_field:<dotted.path>``: the field is present and not ``null``/``""``.
- ``mentions:<text.path>,<value.path>``: the text at the first path contains
  the value at the second (case-insensitive), e.g. the reply names the assignee.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..errors import InvalidSpecError
from ..json_schema import clip, describe
from ..violations import Phase, Violation, ViolationKind

Predicate = Callable[[Any], str | None]

_MISSING = object()


def _get(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def usage_consistent(value: Any) -> str | None:
    usage = value.get("usage", value) if isinstance(value, dict) else None
    if not isinstance(usage, dict):
        return "expected a usage object with prompt_tokens, completion_tokens and total_tokens"
    parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
    if not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
        return "usage must carry integer prompt_tokens, completion_tokens and total_tokens"
    prompt, completion, total = parts
    if total != prompt + completion:
        return f"usage.total_tokens is {total}, expected prompt_tokens + completion_tokens = {prompt + completion}"
    return None


def non_empty(value: Any) -> str | None:
    if value is None or value == "" or value == [] or value == {}:
        return f"expected a non-empty value, got {describe(value)}"
    return None


def has_field(path: str) -> Predicate:
    def check(value: Any) -> str | None:
        found = _get(value, path)
        if found is _MISSING or found is None or found == "":
            return f"expected field {path!r} to be present and not empty"
        return None

    return check


def mentions(argument: str) -> Predicate:
    text_path, sep, value_path = argument.partition(",")
    if not sep or not text_path.strip() or not value_path.strip():
        raise ValueError("expected mentions:<text.path>,<value.path>")
    text_path, value_path = text_path.strip(), value_path.strip()

    def check(value: Any) -> str | None:
        text, wanted = _get(value, text_path), _get(value, value_path)
        if not isinstance(text, str):
            return f"expected text at {text_path!r}, got {describe(None if text is _MISSING else text)}"
        if wanted is _MISSING or wanted is None or str(wanted) == "":
            return f"expected a value at {value_path!r} to be mentioned in {text_path!r}"
        if str(wanted).lower() not in text.lower():
            return f"the text at {text_path!r} must mention {value_path!r} ({describe(wanted)})"
        return None

    return check


PREDICATES: dict[str, Predicate] = {
    "usage_consistent": usage_consistent,
    "non_empty": non_empty,
}

PARAMETRISED: dict[str, Callable[[str], Predicate]] = {
    "has_field": has_field,
    "mentions": mentions,
}


def _spec_error(where: str, message: str) -> InvalidSpecError:
    return InvalidSpecError(
        [Violation(contract="pipeline", phase="pre", kind=ViolationKind.invalid_config, path=where, message=message)]
    )


def resolve_predicate(name: str, *, where: str = "$") -> Predicate:
    """The predicate called ``name``; ``InvalidSpecError`` naming ``where`` if there is none."""
    if not isinstance(name, str):
        raise _spec_error(where, f"a predicate name must be a string, got {describe(name)}")
    if name in PREDICATES:
        return PREDICATES[name]
    base, sep, argument = name.partition(":")
    if sep and base in PARAMETRISED:
        try:
            return PARAMETRISED[base](argument)
        except ValueError as exc:
            raise _spec_error(where, f"predicate {name!r}: {exc}") from exc
    known = sorted([*PREDICATES, *(f"{p}:<arg>" for p in PARAMETRISED)])
    raise _spec_error(where, f"unknown predicate {name!r}; known: {', '.join(known)}")


def predicate_violations(
    names: Iterable[str], value: Any, *, contract: str, phase: Phase, path: str = "$"
) -> list[Violation]:
    """Run each named predicate on ``value``; a failure (or a crash) is a ``Violation``."""
    out: list[Violation] = []
    for name in names:
        check = resolve_predicate(name)
        try:
            message = check(value)
        except Exception as exc:  # noqa: BLE001 - a predicate crash is a failed check, not a workflow crash
            message = f"the check raised {type(exc).__name__}: {exc}"
        if message is not None:
            out.append(
                Violation(
                    contract=contract,
                    phase=phase,
                    kind=ViolationKind.predicate_failed,
                    path=path,
                    message=clip(f"{name}: {message}"),
                )
            )
    return out
