"""Read AgentSpec files (JSON or TOML) into a validated AgentSpec."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import ValidationError

from ..contracts import AgentSpec, InvalidSpecError, Violation, ViolationKind


def load_spec(path: str | Path) -> AgentSpec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InvalidSpecError([_violation("$", f"cannot read spec file {str(path)!r}: {exc.strerror}")]) from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InvalidSpecError([_violation("$", f"{path.name} does not parse: {exc}")]) from None
    return parse_spec(data)


def parse_spec(data: object) -> AgentSpec:
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidSpecError.from_validation(exc, "agent_spec") from None


def _violation(path: str, message: str) -> Violation:
    return Violation(contract="agent_spec", phase="pre", kind=ViolationKind.invalid_config, path=path, message=message)
