"""Property tests: the LLM contract's pre- and postconditions hold up on anything.

Random messages, requests, responses, tool schemas (valid and not) and tool
arguments (JSON or not). The checks never raise, and each returns either no
violation or violations whose path is a well-formed JSON path rooted at ``$``
and whose phase matches the check.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsteps.contracts import LLMConfig, LLMRequest, LLMResponse, Message, ResponseFormat, ToolSchema, Usage
from agentsteps.contracts.llm.messages import LLMToolCall
from agentsteps.contracts.llm.postconditions import check_response, check_tool_output
from agentsteps.contracts.llm.preconditions import check_request, check_tool_schemas

_SEGMENT = r'(?:\.[A-Za-z_][A-Za-z0-9_]*…?|\[\d+\]|\["(?:[^"\\]|\\.)*"\])'
JSON_PATH = re.compile(rf"^\$(?:\.[A-Za-z_][A-Za-z0-9_]*)*{_SEGMENT}*$")

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

names = st.sampled_from(["get_weather", "send", "tickets.list", "x", "bad name!", ""]) | st.text(max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
schemas = st.one_of(
    st.just({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    st.just({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "additionalProperties": False}),
    st.just({"type": "array", "items": {"type": "number"}}),
    st.just({"type": "not-a-type"}),
    st.just({"properties": "nope", "required": 3}),
    st.just({"$ref": "#/definitions/missing"}),
    st.just({"type": "object", "properties": {"a": {"$ref": "#"}}}),
    st.just({"type": "string", "pattern": "("}),
    st.just({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}),
    st.just({"type": "object", "properties": {"weird key!": {"type": "integer"}}, "required": ["weird key!"]}),
    st.dictionaries(
        st.sampled_from(["type", "properties", "required", "items", "enum", "pattern", "$ref"]), json_values, max_size=4
    ),
)
arguments = st.one_of(json_values.map(json.dumps), st.text(max_size=40), st.just('{"city": '), st.just(""))
tool_calls = st.builds(LLMToolCall, id=st.text(max_size=6), name=names, arguments=arguments)


@st.composite
def tools(draw) -> ToolSchema:
    return ToolSchema.model_construct(
        name=draw(names),
        description=draw(st.text(max_size=20)),
        parameters=draw(schemas),
        output_schema=draw(st.none() | schemas),
        side_effects=draw(st.booleans()),
        source="python",
    )


messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.none() | st.text(max_size=60),
    tool_calls=st.lists(tool_calls, max_size=3),
    tool_call_id=st.none() | st.text(max_size=6),
    name=st.none() | names,
    is_error=st.booleans(),
)
configs = st.builds(
    LLMConfig,
    provider=st.sampled_from(["openai", "anthropic"]),
    model=st.sampled_from(["gpt-4o-mini-2024-07-18", "latest", "gpt-4o", "", "claude-x-20250101"])
    | st.text(max_size=20),
    temperature=st.floats(min_value=-5, max_value=5, allow_nan=False) | st.just(float("nan")),
    max_tokens=st.integers(min_value=-10, max_value=200_000),
    context_window=st.integers(min_value=-10, max_value=200_000),
)


@st.composite
def requests(draw) -> LLMRequest:
    return LLMRequest.model_construct(
        config=draw(configs),
        messages=draw(st.lists(messages, max_size=6)),
        tools=draw(st.lists(tools(), max_size=3)),
        tool_choice=draw(st.sampled_from(["auto", "none", "required"])),
        response_format=draw(
            st.none() | schemas.map(lambda s: ResponseFormat.model_construct(name="r", json_schema=s))
        ),
        allowed_model_aliases=draw(st.lists(st.text(max_size=8), max_size=2)),
    )


responses = st.builds(
    LLMResponse,
    message=messages,
    usage=st.builds(
        Usage,
        prompt_tokens=st.integers(-50, 10**6),
        completion_tokens=st.integers(-50, 10**6),
        total_tokens=st.integers(-50, 10**6),
    ),
    finish_reason=st.sampled_from(["stop", "tool_calls", "length", "content_filter", "other"]),
)


def assert_well_formed(violations: Any, phase: str) -> None:
    assert isinstance(violations, list)
    for v in violations:
        assert v.phase == phase
        assert JSON_PATH.match(v.path), v.path
        assert v.message and v.for_model()


@PROPERTY_SETTINGS
@given(requests())
def test_preconditions_never_raise_and_give_valid_paths(request):
    assert_well_formed(check_request(request), "pre")


@PROPERTY_SETTINGS
@given(st.lists(tools(), max_size=4))
def test_tool_schema_checks_never_raise_and_give_valid_paths(schema_list):
    assert_well_formed(check_tool_schemas(schema_list), "pre")


@PROPERTY_SETTINGS
@given(requests(), responses)
def test_postconditions_never_raise_and_give_valid_paths(request, response):
    assert_well_formed(check_response(request, response), "post")


@PROPERTY_SETTINGS
@given(tools(), json_values)
def test_tool_output_checks_never_raise_and_give_valid_paths(tool, value):
    assert_well_formed(check_tool_output(tool, value), "post")


@PROPERTY_SETTINGS
@given(st.lists(st.tuples(names, arguments), min_size=1, max_size=4), st.lists(tools(), max_size=3))
def test_tool_arguments_of_any_shape_are_violations_not_exceptions(calls, schema_list):
    request = LLMRequest.model_construct(
        config=LLMConfig(model="gpt-4o-mini-2024-07-18"),
        messages=[Message.user("hi")],
        tools=schema_list,
        tool_choice="auto",
        response_format=None,
        allowed_model_aliases=[],
    )
    response = LLMResponse(
        message=Message(
            role="assistant",
            tool_calls=[LLMToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)],
        ),
        finish_reason="tool_calls",
    )
    assert_well_formed(check_response(request, response), "post")
