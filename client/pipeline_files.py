"""Reading pipeline files: the I/O half of ``contracts.composition.pipeline_spec``.

Reads TOML or JSON from disk and imports pydantic models named as
``"module:Model"``; everything else (validation, contracts, edge checks) is the
pure code in ``contracts/``.
"""

from __future__ import annotations

import importlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..contracts.composition.contract import Contract
from ..contracts.composition.pipeline_spec import PipelineSpec, parse_pipeline, to_contracts
from ..contracts.errors import InvalidSpecError
from ..contracts.violations import Violation, ViolationKind


@dataclass(frozen=True)
class LoadedPipeline:
    spec: PipelineSpec
    contracts: list[Contract]
    """The steps with every schema resolved to JSON Schema."""


def _error(path: str, message: str) -> InvalidSpecError:
    return InvalidSpecError(
        [Violation(contract="pipeline", phase="pre", kind=ViolationKind.invalid_config, path=path, message=message)]
    )


def read_pipeline_data(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _error("$", f"cannot read pipeline file {str(path)!r}: {exc}") from None
    try:
        if path.suffix == ".toml":
            return tomllib.loads(text)
        if path.suffix == ".json":
            return json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _error("$", f"{path.name} does not parse: {exc}") from None
    raise _error("$", f"{path.name}: a pipeline file ends in .toml or .json")


def import_model_schema(ref: str) -> dict[str, Any]:
    """The JSON Schema of the pydantic model named ``"package.module:Model"``."""
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"module {module_name!r} cannot be imported ({exc})") from None
    model = getattr(module, attr, None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ValueError(f"{ref!r} is not a pydantic model")
    return model.model_json_schema()


def load_pipeline_file(path: str | Path) -> LoadedPipeline:
    spec = parse_pipeline(read_pipeline_data(path))
    return LoadedPipeline(spec=spec, contracts=to_contracts(spec, import_model_schema))
