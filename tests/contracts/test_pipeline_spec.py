"""Pipeline files: parsing, model references, and typed errors naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsteps.client.pipeline_files import import_model_schema, load_pipeline_file
from agentsteps.contracts.composition.contract import ContractKind, compose
from agentsteps.contracts.composition.pipeline_spec import parse_pipeline, to_contracts
from agentsteps.contracts.errors import InvalidSpecError
from agentsteps.examples.support_models import TicketUpdate

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipelines" / "support_reply.toml"


def minimal(**step_overrides) -> dict:
    return {
        "name": "p",
        "steps": [
            {"name": "a", "kind": "llm", "output_schema": {"type": "integer"}},
            {"name": "b", "kind": "tool", "input_schema": {"type": "number"}, **step_overrides},
        ],
    }


def paths_of(exc: InvalidSpecError) -> list[str]:
    return [v.path for v in exc.violations]


def test_the_example_pipeline_loads_with_model_references_resolved_and_composes():
    loaded = load_pipeline_file(EXAMPLE)
    assert [c.kind for c in loaded.contracts] == [ContractKind.llm, ContractKind.tool, ContractKind.llm_final]
    assert loaded.contracts[0].output_schema == TicketUpdate.model_json_schema()
    assert loaded.spec.steps[1].tool == "update_ticket"
    assert loaded.spec.model is not None and loaded.spec.model.model == "gpt-4o-mini-2024-07-18"
    compose(*loaded.contracts)


def test_json_and_inline_schemas_load_like_toml(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(minimal()))
    loaded = load_pipeline_file(path)
    assert loaded.contracts[1].input_schema == {"type": "number"}


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"name": "p", "steps": []}, "$.steps"),
        ({"name": "p"}, "$.steps"),
        ({"name": "p", "steps": [{"name": "a", "kind": "robot"}]}, "$.steps[0].kind"),
        ({"name": "p", "steps": [{"name": "a", "kind": "llm", "colour": "red"}]}, "$.steps[0].colour"),
        ({"name": "p", "steps": [{"name": "a b", "kind": "llm"}]}, "$.steps[0].name"),
        (
            {"name": "p", "steps": [{"name": "a", "kind": "llm", "input_schema": "not a ref"}]},
            "$.steps[0].input_schema",
        ),
        ({"name": "p", "steps": [{"name": "a", "kind": "llm", "tool": "x"}]}, "$.steps[0].tool"),
        ({"name": "p", "steps": [{"name": "a", "kind": "llm"}, {"name": "a", "kind": "tool"}]}, "$.steps[1].name"),
        (
            {"name": "p", "acknowledge_unproven": ["a->z"], "steps": [{"name": "a", "kind": "llm"}]},
            "$.acknowledge_unproven[0]",
        ),
        ({"name": "p", "steps": [{"name": "a", "kind": "llm", "reprompt_budget": -1}]}, "$.steps[0].reprompt_budget"),
        (["not", "a", "table"], "$"),
    ],
)
def test_malformed_pipelines_raise_invalid_spec_error_naming_the_field(data, path):
    with pytest.raises(InvalidSpecError) as info:
        parse_pipeline(data)
    assert path in paths_of(info.value)


def test_a_model_reference_that_does_not_import_names_the_field():
    spec = parse_pipeline(minimal(input_schema="agentsteps.no_such_module:Model"))
    with pytest.raises(InvalidSpecError) as info:
        to_contracts(spec, import_model_schema)
    assert paths_of(info.value) == ["$.steps[1].input_schema"]
    assert "cannot be imported" in info.value.violations[0].message


def test_a_reference_to_something_that_is_not_a_pydantic_model_is_rejected():
    spec = parse_pipeline(minimal(input_schema="agentsteps.contracts.composition.contract:compose"))
    with pytest.raises(InvalidSpecError, match="not a pydantic model"):
        to_contracts(spec, import_model_schema)


@pytest.mark.parametrize(
    ("name", "text"),
    [("broken.toml", "name = \n"), ("broken.json", "{"), ("pipeline.yaml", "name: p")],
)
def test_unparseable_or_unknown_files_are_typed_errors(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InvalidSpecError) as info:
        load_pipeline_file(path)
    assert info.value.violations[0].path == "$"


def test_a_missing_file_is_a_typed_error(tmp_path):
    with pytest.raises(InvalidSpecError, match="cannot read"):
        load_pipeline_file(tmp_path / "absent.toml")
