"""An invalid AgentSpec is rejected before a run starts, naming the field."""

from __future__ import annotations

import json

import pytest
from agent_support import make_spec

from agentsteps.client.runs import validate_spec
from agentsteps.client.spec_files import load_spec
from agentsteps.contracts import InvalidSpecError, LLMConfig
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.examples.demo_tools import build_registry

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`


@pytest.fixture
def known_tools(tmp_path):
    return build_registry(WorkerSettings(state_dir=tmp_path)).schemas()


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"tools": ["get_weather", "nope"]}, "$.tools[1]", "nope"),
        ({"output_schema": {"type": 12}}, "$.output_schema", "schema"),
        ({"model": LLMConfig(model="scripted-2026-01-01", temperature=3)}, "$.model.temperature", "3"),
        ({"model": LLMConfig(model="latest")}, "$.model.model", "latest"),
        ({"model": LLMConfig(model="gpt-4o")}, "$.model.model", "gpt-4o"),
        ({"fallback_models": [LLMConfig(model="claude-3-5-sonnet-latest")]}, "$.fallback_models[0].model", "latest"),
        ({"model": LLMConfig(model="scripted-2026-01-01", max_tokens=0)}, "$.model.max_tokens", "0"),
    ],
)
def test_invalid_spec_is_rejected_naming_the_field(known_tools, overrides, field, words):
    with pytest.raises(InvalidSpecError) as caught:
        validate_spec(make_spec(**overrides), known_tools)
    paths = [v.path for v in caught.value.violations]
    assert any(p.startswith(field) for p in paths), paths
    assert words in str(caught.value)


def test_allow_listed_alias_is_accepted(known_tools):
    validate_spec(make_spec(model=LLMConfig(model="gpt-4o"), allowed_model_aliases=["gpt-4o"]), known_tools)


@pytest.mark.parametrize(
    ("content", "suffix", "field"),
    [
        ("{not json", ".json", "$"),
        ('name = "x"\n[model]\nmodel = 5\n', ".toml", "$.model.model"),
        ('{"model": {"model": "m-2026-01-01"}, "surprise": 1}', ".json", "$.surprise"),
        ('{"model": {"model": "m-2026-01-01"}, "mode": "telepathy"}', ".json", "$.mode"),
        ("[1, 2]", ".json", "$"),
    ],
)
def test_malformed_spec_files_raise_typed_errors_naming_the_field(tmp_path, content, suffix, field):
    path = tmp_path / f"spec{suffix}"
    path.write_text(content)
    with pytest.raises(InvalidSpecError) as caught:
        load_spec(path)
    assert field in [v.path for v in caught.value.violations]


def test_example_spec_file_loads_and_validates(known_tools):
    spec = load_spec("examples/demo_agent.toml")
    validate_spec(spec, known_tools)
    assert json.loads(json.dumps(spec.output_schema))["required"] == ["summary", "warmest_city"]
