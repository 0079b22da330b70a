"""The static prover: proven / refuted with a checked counterexample / unproven.

Every refutation here is re-checked with plain ``jsonschema`` in the test
itself, so a wrong counterexample fails the test even if the module's own
check were broken.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal, Optional

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field

from agentsteps.contracts.composition.prover import Verdict, check_schema_compat
from agentsteps.contracts.errors import AgentStepsError, InvalidSpecError

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`


def assert_refuted(out: dict, inp: dict) -> object:
    result = check_schema_compat(out, inp)
    assert result.verdict is Verdict.refuted, result
    assert result.counterexample is not None
    value = result.counterexample.value
    assert jsonschema.Draft202012Validator(out).is_valid(value), f"{value!r} does not fit the output schema"
    assert not jsonschema.Draft202012Validator(inp).is_valid(value), f"{value!r} is accepted by the input schema"
    return value


def assert_proven(out: dict, inp: dict) -> None:
    result = check_schema_compat(out, inp)
    assert result.verdict is Verdict.proven, result


def assert_unproven(out: dict, inp: dict, why: str) -> None:
    result = check_schema_compat(out, inp)
    assert result.verdict is Verdict.unproven, result
    assert why in result.reason, result.reason


# --- pydantic models, as producers and consumers -----------------------------


class Priority(str, Enum):
    low = "low"
    high = "high"


class Address(BaseModel):
    city: str
    postcode: Optional[str] = None


class Customer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=80)
    age: int = Field(ge=18, le=120)
    address: Address
    tags: list[str] = []
    priority: Priority = Priority.low
    nickname: Optional[str] = None


class CustomerLoose(BaseModel):
    name: str
    age: int = Field(ge=0)
    address: Address
    tags: list[str] = []
    priority: Literal["low", "high", "urgent"] = "low"
    nickname: Optional[str] = None


class Node(BaseModel):
    label: str
    children: list["Node"] = []


def test_pydantic_model_with_nested_model_and_optional_fields_is_proven_into_a_looser_model():
    assert_proven(Customer.model_json_schema(), CustomerLoose.model_json_schema())


def test_identical_pydantic_schemas_are_proven():
    assert_proven(Customer.model_json_schema(), Customer.model_json_schema())


def test_looser_pydantic_model_into_stricter_one_is_refuted_with_a_checked_counterexample():
    value = assert_refuted(CustomerLoose.model_json_schema(), Customer.model_json_schema())
    assert isinstance(value, dict)


def test_integer_into_number_and_narrower_bounds_are_proven():
    assert_proven({"type": "integer", "minimum": 1, "maximum": 5}, {"type": "number", "exclusiveMinimum": 0})
    assert_proven({"type": "integer", "exclusiveMinimum": 0}, {"type": "integer", "minimum": 1})


def test_optional_into_optional_is_proven_branch_by_branch():
    opt = {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}
    assert_proven(opt, {"anyOf": [{"type": "string"}, {"type": "null"}]})
    assert_proven(opt, {"type": ["string", "null"]})


def test_enum_subset_and_const_are_proven():
    assert_proven({"enum": ["a", "b"]}, {"type": "string", "enum": ["a", "b", "c"]})
    assert_proven({"const": 3}, {"type": "integer", "minimum": 0})


def test_forbidding_extra_properties_on_the_output_is_proven_into_a_closed_input():
    out = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}
    inp = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert_proven(out, inp)


def test_empty_input_schema_accepts_everything():
    assert_proven({"type": "object", "pattern": "x"}, {})


# --- refuted chains, each counterexample re-checked ---------------------------


def test_type_mismatch_is_refuted():
    value = assert_refuted({"type": "integer"}, {"type": "string"})
    assert isinstance(value, int)


def test_missing_required_field_is_refuted_with_an_object_that_omits_it():
    out = {"type": "object", "properties": {"id": {"type": "integer"}, "note": {"type": "string"}}, "required": ["id"]}
    inp = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "note": {"type": "string"}},
        "required": ["id", "note"],
    }
    value = assert_refuted(out, inp)
    assert "note" not in value
    assert check_schema_compat(out, inp).path == "$.note"


def test_enum_widening_is_refuted_with_the_extra_value():
    value = assert_refuted({"enum": ["open", "closed", "pending"]}, {"enum": ["open", "closed"]})
    assert value == "pending"


def test_nullable_output_into_required_input_is_refuted_with_null():
    out = {
        "type": "object",
        "properties": {"email": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["email"],
    }
    inp = {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}
    value = assert_refuted(out, inp)
    assert value == {"email": None}


def test_optional_pydantic_field_into_required_field_is_refuted():
    class Out(BaseModel):
        email: Optional[str] = None

    class In(BaseModel):
        email: str

    assert_refuted(Out.model_json_schema(), In.model_json_schema())


def test_additional_properties_allowed_into_forbidden_is_refuted_with_an_extra_key():
    out = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    inp = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    value = assert_refuted(out, inp)
    assert set(value) - {"a"}


def test_additional_properties_schema_mismatch_is_refuted():
    out = {"type": "object", "additionalProperties": {"type": "integer"}}
    inp = {"type": "object", "additionalProperties": {"type": "string"}}
    assert_refuted(out, inp)


def test_undeclared_output_property_collides_with_a_declared_input_property():
    out = {"type": "object", "properties": {"a": {"type": "string"}}}
    inp = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    value = assert_refuted(out, inp)
    assert "b" in value


@pytest.mark.parametrize(
    ("out", "inp"),
    [
        ({"type": "integer", "minimum": 0, "maximum": 200}, {"type": "integer", "minimum": 0, "maximum": 100}),
        ({"type": "number", "minimum": 0}, {"type": "number", "exclusiveMinimum": 0}),
        ({"type": "number"}, {"type": "number", "maximum": 10}),
        ({"type": "integer", "minimum": -5}, {"type": "integer", "minimum": 0}),
    ],
)
def test_wider_numeric_bounds_are_refuted(out, inp):
    assert_refuted(out, inp)


def test_float_output_into_integer_input_is_refuted_with_a_fraction():
    value = assert_refuted({"type": "number", "minimum": 0, "maximum": 3}, {"type": "integer"})
    assert not float(value).is_integer()


def test_wider_string_length_is_refuted():
    assert_refuted({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5})
    assert_refuted({"type": "string"}, {"type": "string", "minLength": 1})


def test_array_item_mismatch_is_refuted_with_an_array():
    value = assert_refuted(
        {"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "string"}}
    )
    assert isinstance(value, list) and value
    assert (
        check_schema_compat(
            {"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "string"}}
        ).path
        == "$[*]"
    )


def test_nested_arrays_of_objects_are_refuted_deep_inside():
    out = {
        "type": "array",
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
        },
    }
    inp = {
        "type": "array",
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        },
    }
    value = assert_refuted(out, inp)
    assert check_schema_compat(out, inp).path == "$[*][*].n"
    assert isinstance(value[0][0]["n"], float)


def test_nested_ref_mismatch_is_refuted_through_defs():
    out = {
        "$defs": {"Item": {"type": "object", "properties": {"qty": {"type": "integer"}}, "required": ["qty"]}},
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1}},
        "required": ["items"],
    }
    inp = {
        "$defs": {
            "Item": {"type": "object", "properties": {"qty": {"type": "integer", "minimum": 1}}, "required": ["qty"]}
        },
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["items"],
    }
    value = assert_refuted(out, inp)
    assert value["items"][0]["qty"] < 1


def test_pydantic_nested_model_mismatch_is_refuted():
    class LineA(BaseModel):
        sku: str
        qty: int

    class OrderA(BaseModel):
        lines: list[LineA]

    class LineB(BaseModel):
        sku: str
        qty: int = Field(gt=0)

    class OrderB(BaseModel):
        lines: list[LineB]

    assert_refuted(OrderA.model_json_schema(), OrderB.model_json_schema())


def test_unique_items_required_but_not_guaranteed_is_refuted():
    value = assert_refuted({"type": "array", "items": {"type": "integer"}}, {"type": "array", "uniqueItems": True})
    assert len(value) != len(set(value))


def test_anything_into_false_schema_is_refuted():
    assert_refuted({"type": "string"}, False)


# --- unproven ----------------------------------------------------------------


def test_differing_patterns_are_unproven():
    assert_unproven({"type": "string", "pattern": "^[a-z]+$"}, {"type": "string", "pattern": "^[a-z]*$"}, "pattern")


def test_identical_patterns_are_proven():
    assert_proven({"type": "string", "pattern": "^[a-z]+$"}, {"type": "string", "pattern": "^[a-z]+$"})


def test_a_pattern_the_output_visibly_breaks_is_refuted():
    value = assert_refuted({"type": "string"}, {"type": "string", "pattern": "^[0-9]+$"})
    assert not value.isdigit()


def test_differing_formats_are_unproven_and_identical_ones_proven():
    assert_unproven({"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}, "format")
    assert_proven({"type": "string", "format": "email"}, {"type": "string", "format": "email"})


def test_recursive_ref_is_unproven():
    assert_unproven(Node.model_json_schema(), Node.model_json_schema(), "recursive $ref")


def test_union_split_across_input_branches_is_unproven_not_proven():
    # Every integer is >= 0 or < 0, but no single branch takes them all.
    out = {"type": "integer"}
    inp = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": -1}]}
    assert_unproven(out, inp, "anyOf")


def test_unmodelled_input_keyword_is_unproven():
    assert_unproven(
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"type": "object", "minProperties": 1},
        "minProperties",
    )


def test_pattern_properties_on_the_output_is_unproven_not_proven():
    # patternProperties lets "x1" through despite additionalProperties: false.
    out = {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": False}
    inp = {"type": "object", "additionalProperties": False}
    result = check_schema_compat(out, inp)
    assert result.verdict is not Verdict.proven


def test_openapi_nullable_is_not_taken_as_json_schema():
    assert_unproven({"type": "string"}, {"type": "string", "nullable": True}, "nullable")


def test_remote_ref_is_unproven_and_never_fetched():
    # Unresolvable refs are rejected as an invalid schema, not fetched.
    with pytest.raises(InvalidSpecError):
        check_schema_compat({"type": "string"}, {"$ref": "https://example.com/schema.json"})


# --- hostile input --------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "strnig"},
        {"type": "object", "required": "a"},
        {"minimum": "zero"},
        {"pattern": "("},
        {"$ref": "#/$defs/Missing"},
        ["not", "a", "schema"],
        "string",
    ],
)
def test_a_schema_that_is_not_json_schema_raises_a_typed_error_naming_the_side(bad):
    with pytest.raises(InvalidSpecError) as info:
        check_schema_compat(bad, {"type": "string"})
    assert isinstance(info.value, AgentStepsError)
    assert any(v.path.startswith("$.output_schema") for v in info.value.violations)
    with pytest.raises(InvalidSpecError) as info:
        check_schema_compat({"type": "string"}, bad)
    assert any(v.path.startswith("$.input_schema") for v in info.value.violations)


def test_draft4_dialect_is_unproven():
    assert_unproven(
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
        {"type": "integer"},
        "dialect",
    )


def nested_arrays(depth: int) -> dict:
    deep: dict = {"type": "integer"}
    for _ in range(depth):
        deep = {"type": "array", "items": deep}
    return deep


def test_moderately_deep_schema_is_proven_and_beyond_the_depth_limit_is_unproven():
    assert_proven(nested_arrays(30), nested_arrays(30))
    assert_unproven(nested_arrays(60), nested_arrays(60), "deeper")


def test_absurdly_deep_schema_is_a_typed_error_not_a_crash():
    with pytest.raises(InvalidSpecError):
        check_schema_compat(nested_arrays(2000), {})
