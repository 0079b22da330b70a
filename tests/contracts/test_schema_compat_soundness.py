"""Soundness as a property: whatever the checker calls proven really is.

``hypothesis-jsonschema`` generates instances of the output schema; every one
must validate against the input schema. Run over the proven corpus of
``test_schema_compat`` plus randomly generated schema pairs, which also check
that every refutation's counterexample holds up.
"""

from __future__ import annotations

import os

import jsonschema
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from agentsteps.contracts.composition.prover import Verdict, check_schema_compat

hypothesis_jsonschema = pytest.importorskip("hypothesis_jsonschema")
from_schema = hypothesis_jsonschema.from_schema

from test_schema_compat import Customer, CustomerLoose  # noqa: E402

PROVEN_CORPUS = [
    (Customer.model_json_schema(), CustomerLoose.model_json_schema()),
    ({"type": "integer", "minimum": 1, "maximum": 5}, {"type": "number", "exclusiveMinimum": 0}),
    ({"type": "integer", "exclusiveMinimum": 0}, {"type": "integer", "minimum": 1}),
    ({"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}, {"type": ["string", "null"]}),
    ({"enum": ["a", "b"]}, {"type": "string", "enum": ["a", "b", "c"]}),
    (
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False},
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "additionalProperties": False,
        },
    ),
    (
        {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},
        },
        {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "number"}}}},
    ),
]

# A third of the full counts in `make test` (the file was 42 s of CPU); AGENTSTEPS_PROPERTY_SCALE=1 runs them all.
SCALE = float(os.environ.get("AGENTSTEPS_PROPERTY_SCALE", "0.34"))


def examples(full: int) -> int:
    return max(25, round(full * SCALE))


PROPERTY_SETTINGS = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck), database=None
)


@pytest.mark.parametrize("pair", PROVEN_CORPUS, ids=lambda p: str(p)[:40])
def test_every_generated_instance_of_a_proven_corpus_edge_validates_against_the_input(pair):
    out, inp = pair
    assert check_schema_compat(out, inp).verdict is Verdict.proven
    validator = jsonschema.Draft202012Validator(inp)

    @PROPERTY_SETTINGS
    @given(from_schema(out))
    def instances_fit(value):
        assert validator.is_valid(value), value

    instances_fit()


# --- generated schema pairs -------------------------------------------------------

_SMALL = st.sampled_from([-2, -1, 0, 1, 2])
_HALVES = st.sampled_from([-1, -0.5, 0, 0.5, 1])


def _optional(key: str, values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.just({}), values.map(lambda v: {key: v}))


def _merge(*parts: dict) -> dict:
    out: dict = {}
    for p in parts:
        out.update(p)
    return out


_integer = st.builds(
    _merge,
    st.just({"type": "integer"}),
    _optional("minimum", _SMALL),
    _optional("maximum", _SMALL),
    _optional("exclusiveMinimum", _SMALL),
)
_number = st.builds(
    _merge, st.just({"type": "number"}), _optional("minimum", _HALVES), _optional("exclusiveMaximum", _HALVES)
)
_string = st.builds(
    _merge,
    st.just({"type": "string"}),
    _optional("minLength", st.integers(0, 2)),
    _optional("maxLength", st.integers(2, 3)),
)
_enum = st.lists(st.sampled_from(["a", "b", "c", 1, None]), min_size=1, max_size=3, unique=True).map(
    lambda vs: {"enum": vs}
)
_scalar = st.one_of(
    _integer,
    _number,
    _string,
    _enum,
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.just({"type": ["integer", "null"]}),
)


def _containers(child: st.SearchStrategy) -> st.SearchStrategy:
    keys = st.sampled_from(["a", "b", "c"])
    obj = st.builds(
        lambda props, required, extra: _merge(
            {"type": "object", "properties": props, "required": sorted(set(required) & set(props))}, extra
        ),
        st.dictionaries(keys, child, max_size=3),
        st.lists(keys, max_size=3),
        st.one_of(
            st.just({}),
            st.just({"additionalProperties": False}),
            child.map(lambda c: {"additionalProperties": c}),
        ),
    )
    arr = st.builds(
        lambda items, lo, hi: _merge({"type": "array", "items": items}, lo, hi),
        child,
        _optional("minItems", st.integers(0, 1)),
        _optional("maxItems", st.integers(1, 3)),
    )
    nullable = child.map(lambda c: {"anyOf": [c, {"type": "null"}]})
    return st.one_of(obj, arr, nullable)


schemas = st.recursive(_scalar, _containers, max_leaves=5)


def draw_instance(data, schema):
    try:
        strategy = from_schema(schema)
    except InvalidArgument:  # an unsatisfiable generated schema; nothing to check
        reject()
    return data.draw(strategy)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(out=schemas, inp=schemas, data=st.data())
def test_generated_pairs_proven_means_every_instance_fits_and_refuted_means_a_real_counterexample(out, inp, data):
    result = check_schema_compat(out, inp)
    out_validator = jsonschema.Draft202012Validator(out)
    in_validator = jsonschema.Draft202012Validator(inp)
    if result.verdict is Verdict.refuted:
        value = result.counterexample.value
        assert out_validator.is_valid(value) and not in_validator.is_valid(value), (out, inp, value)
    elif result.verdict is Verdict.proven:
        for _ in range(10):
            value = draw_instance(data, out)
            assert in_validator.is_valid(value), (out, inp, value)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(base=schemas, data=st.data())
def test_a_schema_is_proven_against_itself_or_honestly_unproven(base, data):
    result = check_schema_compat(base, base)
    assert result.verdict is not Verdict.refuted, result
    if result.verdict is Verdict.proven:
        validator = jsonschema.Draft202012Validator(base)
        for _ in range(5):
            assert validator.is_valid(draw_instance(data, base))
