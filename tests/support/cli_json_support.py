"""Reading ``--json`` output the way a consumer must: by the shape it names, against that shape's JSON Schema.

The schemas are in ``docs/cli-json/`` (one file per shape and major). A shape's
schema as first released is kept in ``tests/client_cli/cli_json_released.json``: never
edited, only added to when a new shape or major appears.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "cli-json"
RELEASED = ROOT / "tests" / "client_cli" / "cli_json_released.json"


def schema_file(shape: str) -> Path:
    """``agentsteps/tools-list@1`` -> ``docs/cli-json/tools-list@1.json``."""
    prefix, _, name = shape.partition("/")
    assert prefix == "agentsteps" and "@" in name, f"not an agentsteps shape name: {shape!r}"
    return SCHEMAS / f"{name}.json"


@cache
def shape_schema(shape: str) -> dict[str, Any]:
    return json.loads(schema_file(shape).read_text())


def released() -> dict[str, dict[str, Any]]:
    return json.loads(RELEASED.read_text())


def pinned(text: str, shape: str) -> dict[str, Any]:
    """Parse one ``--json`` document; it must name ``shape`` first and match that shape's schema exactly."""
    body = json.loads(text)
    assert isinstance(body, dict), f"--json output must be one object, got {type(body).__name__}"
    assert next(iter(body), None) == "schema", "the shape's name comes first"
    assert body["schema"] == shape, body["schema"]
    validator = Draft202012Validator(shape_schema(shape), format_checker=Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    assert not errors, (
        f"{shape}: the output no longer matches {schema_file(shape).relative_to(ROOT)}: "
        + "; ".join(f"at {e.json_path}: {e.message}" for e in errors[:5])
        + ". A new key: add it to that schema (compatible). Anything else: a new major (docs/compatibility.md)."
    )
    return body
