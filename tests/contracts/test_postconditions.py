"""The llm.call postconditions and tool-output checks, including hostile answers (pure, no Temporal)."""

from __future__ import annotations

import json
import math
import time

import pytest
from pydantic import BaseModel

from agentsteps.contracts import (
    LLMConfig,
    LLMRequest,
    LLMResponse,
    LLMToolCall,
    Message,
    ResponseFormat,
    ToolSchema,
    Usage,
    ViolationKind,
)
from agentsteps.contracts.llm.arguments import parse_tool_arguments
from agentsteps.contracts.llm.postconditions import check_response, check_tool_output

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

K = ViolationKind
WEATHER = ToolSchema(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "minLength": 1}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
        "additionalProperties": False,
    },
)
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number", "maximum": 1}},
    "required": ["answer"],
}


def request(**overrides) -> LLMRequest:
    fields = {
        "config": LLMConfig(model="gpt-4o-2024-08-06", max_tokens=256),
        "messages": [Message.user("weather in Paris?")],
        "tools": [WEATHER],
        **overrides,
    }
    return LLMRequest(**fields)


def calls(*pairs: tuple[str, str]) -> LLMResponse:
    tool_calls = [LLMToolCall(id=f"c{i}", name=name, arguments=args) for i, (name, args) in enumerate(pairs)]
    return LLMResponse(
        message=Message(role="assistant", tool_calls=tool_calls),
        usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15),
        finish_reason="tool_calls",
    )


def text(content: str | None, **overrides) -> LLMResponse:
    fields = {
        "message": Message(role="assistant", content=content),
        "usage": Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15),
        **overrides,
    }
    return LLMResponse(**fields)


def only(violations, kind: ViolationKind):
    matching = [v for v in violations if v.kind == kind]
    assert len(matching) == 1, violations
    assert len(violations) == 1, violations
    return matching[0]


JSON_FORMAT = ResponseFormat(json_schema=ANSWER_SCHEMA)


# ---------------------------------------------------------------- passing answers


def test_valid_tool_call_passes():
    assert check_response(request(), calls(("get_weather", '{"city": "Paris", "days": 2}'))) == []


def test_plain_text_answer_passes():
    assert check_response(request(), text("It is sunny.")) == []


def test_json_answer_matching_the_response_format_passes():
    assert check_response(request(response_format=JSON_FORMAT), text('{"answer": "sunny", "confidence": 0.9}')) == []


def test_tool_call_with_response_format_skips_the_json_answer_check():
    response = calls(("get_weather", '{"city": "Paris"}'))
    assert check_response(request(response_format=JSON_FORMAT), response) == []


@pytest.mark.parametrize("blank", ["", "   "])
def test_blank_arguments_mean_no_arguments(blank):
    no_params = ToolSchema(name="now")
    assert check_response(request(tools=[no_params]), calls(("now", blank))) == []
    assert parse_tool_arguments(blank) == ({}, None)


# ---------------------------------------------------------------- tool calls


def test_unknown_tool_is_named_with_the_available_ones():
    v = only(check_response(request(), calls(("get_wether", "{}"))), K.unknown_tool)
    assert v.path == "$.tool_calls[0].name"
    assert "get_wether" in v.message and "get_weather" in v.message
    assert (v.contract, v.phase) == ("llm.call", "post")


def test_tool_call_when_no_tools_were_offered_is_unknown():
    v = only(check_response(request(tools=[]), calls(("get_weather", "{}"))), K.unknown_tool)
    assert "none" in v.message


def test_arguments_that_are_not_json_are_rejected():
    v = only(check_response(request(), calls(("get_weather", "{city: Paris}"))), K.tool_arguments_not_json)
    assert v.path == "$.tool_calls[0].arguments"
    assert "invalid JSON" in v.message and "JSON object" in v.message


@pytest.mark.parametrize(
    ("arguments", "named"),
    [("[1, 2]", "array"), ('"Paris"', "string"), ("42", "number"), ("null", "null"), ("true", "boolean")],
)
def test_arguments_that_are_json_but_not_an_object_are_rejected(arguments, named):
    v = only(check_response(request(), calls(("get_weather", arguments))), K.tool_arguments_not_json)
    assert f"got {named}" in v.message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(constant):
    v = only(
        check_response(request(), calls(("get_weather", f'{{"city": "Paris", "days": {constant}}}'))),
        K.tool_arguments_not_json,
    )
    assert constant.lstrip("-") in v.message


def test_argument_of_the_wrong_type_points_into_the_arguments():
    v = only(check_response(request(), calls(("get_weather", '{"city": 7}'))), K.tool_arguments_invalid)
    assert v.path == "$.tool_calls[0].arguments.city"
    assert "7 is not of type 'string'" in v.message


def test_missing_required_argument_is_reported_at_the_arguments_object():
    v = only(check_response(request(), calls(("get_weather", '{"days": 2}'))), K.tool_arguments_invalid)
    assert v.path == "$.tool_calls[0].arguments"
    assert "'city' is a required property" in v.message


def test_extra_argument_is_reported():
    v = only(
        check_response(request(), calls(("get_weather", '{"city": "Rome", "units": "C"}'))), K.tool_arguments_invalid
    )
    assert "'units'" in v.message


def test_each_bad_call_is_reported_at_its_own_index():
    response = calls(("get_weather", '{"city": "Paris"}'), ("get_weather", '{"city": ""}'))
    v = only(check_response(request(), response), K.tool_arguments_invalid)
    assert v.path == "$.tool_calls[1].arguments.city"


def test_schema_with_unresolvable_ref_gives_a_violation_not_a_crash():
    broken = ToolSchema(name="b", parameters={"type": "object", "properties": {"x": {"$ref": "#/$defs/gone"}}})
    v = only(check_response(request(tools=[broken]), calls(("b", '{"x": 1}'))), K.tool_arguments_invalid)
    assert "cannot be resolved" in v.message


def test_self_referencing_schema_does_not_recurse_forever():
    loop = ToolSchema(name="loop", parameters={"type": "object", "$ref": "#"})
    violations = check_response(request(tools=[loop]), calls(("loop", "{}")))
    assert [v.kind for v in violations] == [K.tool_arguments_invalid]


def test_schema_with_a_bad_regex_gives_a_violation_not_a_crash():
    bad = ToolSchema(name="r", parameters={"type": "object", "properties": {"s": {"type": "string", "pattern": "(["}}})
    violations = check_response(request(tools=[bad]), calls(("r", '{"s": "x"}')))
    assert [v.kind for v in violations] == [K.tool_arguments_invalid]


# ---------------------------------------------------------------- hostile arguments


def test_deeply_nested_arguments_are_rejected_not_crashed_on():
    deep = '{"city": ' + "[" * 100_000 + "]" * 100_000 + "}"
    v = only(check_response(request(), calls(("get_weather", deep))), K.tool_arguments_not_json)
    assert "deep" in v.message


def test_moderately_nested_arguments_validate_without_crashing():
    nested = '{"city": "x", "extra": ' + "[" * 900 + "]" * 900 + "}"
    v = only(check_response(request(), calls(("get_weather", nested))), K.tool_arguments_invalid)
    assert "'extra'" in v.message


def test_huge_arguments_give_a_short_message():
    huge = json.dumps({"city": 1, "days": "x" * 5_000_000})
    started = time.monotonic()
    violations = check_response(request(), calls(("get_weather", huge)))
    assert time.monotonic() - started < 5
    assert {v.path for v in violations} == {"$.tool_calls[0].arguments.city", "$.tool_calls[0].arguments.days"}
    assert all(len(v.message) <= 400 for v in violations)
    assert all("is not of type" in v.message for v in violations)


def test_huge_integer_is_rejected_not_crashed_on():
    v = only(
        check_response(request(), calls(("get_weather", '{"days": ' + "9" * 10_000 + "}"))), K.tool_arguments_not_json
    )
    assert v.path == "$.tool_calls[0].arguments"
    assert "too many digits" in v.message


def test_many_errors_are_capped():
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(1_000)}}
    many = ToolSchema(name="many", parameters=schema)
    arguments = json.dumps({f"p{i}": "x" for i in range(1_000)})
    violations = check_response(request(tools=[many]), calls(("many", arguments)))
    assert len(violations) == 5


def test_many_bad_calls_are_capped():
    response = calls(*[("nope", "{}")] * 1_000)
    assert len(check_response(request(), response)) == 5


def test_hostile_key_is_clipped_in_the_path():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    open_tool = ToolSchema(name="open", parameters=schema)
    key = "k" * 100_000
    [v] = check_response(request(tools=[open_tool]), calls(("open", json.dumps({key: "x"}))))
    assert len(v.path) < 150


# ---------------------------------------------------------------- the JSON final answer


def test_answer_that_is_not_json_is_rejected():
    v = only(check_response(request(response_format=JSON_FORMAT), text("sunny")), K.response_not_json)
    assert v.path == "$.content"
    assert "JSON" in v.message


def test_fenced_json_answer_is_told_to_drop_the_fence():
    fenced = '```json\n{"answer": "sunny"}\n```'
    v = only(check_response(request(response_format=JSON_FORMAT), text(fenced)), K.response_not_json)
    assert "code fence" in v.message


def test_answer_not_matching_the_schema_points_into_it():
    v = only(
        check_response(request(response_format=JSON_FORMAT), text('{"answer": "sunny", "confidence": 3}')),
        K.response_schema_mismatch,
    )
    assert v.path == "$.content.confidence"
    assert "3 is greater than the maximum of 1" in v.message


def test_answer_that_is_a_json_array_is_a_schema_mismatch():
    v = only(check_response(request(response_format=JSON_FORMAT), text("[1]")), K.response_schema_mismatch)
    assert v.path == "$.content"
    assert "not of type 'object'" in v.message


def test_answer_with_nan_is_not_json():
    only(
        check_response(request(response_format=JSON_FORMAT), text('{"answer": "x", "confidence": NaN}')),
        K.response_not_json,
    )


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_empty_answer_is_rejected(content):
    v = only(check_response(request(), text(content)), K.empty_response)
    assert v.path == "$.content"


def test_empty_answer_with_response_format_is_only_reported_once():
    only(check_response(request(response_format=JSON_FORMAT), text("")), K.empty_response)


# ---------------------------------------------------------------- usage and finish reason


def test_usage_total_must_be_the_sum():
    bad = text("ok", usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=16))
    v = only(check_response(request(), bad), K.usage_inconsistent)
    assert v.path == "$.usage.total_tokens"
    assert "16" in v.message


def test_negative_usage_is_rejected():
    bad = text("ok", usage=Usage(prompt_tokens=-1, completion_tokens=1, total_tokens=0))
    v = only(check_response(request(), bad), K.usage_inconsistent)
    assert v.path == "$.usage.prompt_tokens"


def test_zero_usage_is_consistent():
    assert check_response(request(), text("ok", usage=Usage())) == []


def test_finish_reason_length_is_truncated():
    v = only(check_response(request(), text("It is sun", finish_reason="length")), K.truncated)
    assert v.path == "$.finish_reason"
    assert "256" in v.message


def test_non_assistant_reply_is_rejected():
    odd = LLMResponse(message=Message(role="user", content="hi"), usage=Usage())
    v = only(check_response(request(), odd), K.invalid_role_order)
    assert v.path == "$.role"


# ---------------------------------------------------------------- tool output


REPORT = ToolSchema(
    name="weather_report",
    output_schema={
        "type": "object",
        "properties": {"temp": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["temp"],
    },
)


def test_tool_output_matching_its_schema_passes():
    assert check_tool_output(REPORT, {"temp": 21.5, "tags": ["sunny"]}) == []


def test_tool_without_output_schema_accepts_anything():
    assert check_tool_output(ToolSchema(name="free"), object()) == []


def test_tool_output_mismatch_names_the_tool_and_the_path():
    [v] = check_tool_output(REPORT, {"temp": 21, "tags": ["ok", 3]})
    assert (v.contract, v.phase, v.kind) == ("tool.weather_report", "post", K.tool_output_invalid)
    assert v.path == "$.tags[1]"


def test_tool_output_given_as_a_pydantic_model_is_dumped_first():
    class Report(BaseModel):
        temp: float
        tags: list[str] = []

    assert check_tool_output(REPORT, Report(temp=3)) == []


@pytest.mark.parametrize("value", [None, "text", [1, 2], math.nan, {1, 2}])
def test_tool_output_of_the_wrong_shape_is_a_violation(value):
    [v] = check_tool_output(REPORT, value)
    assert v.kind == K.tool_output_invalid
    assert v.path == "$"
