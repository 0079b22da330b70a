"""The llm.call preconditions, the AgentSpec checks and offline token counting (pure, no Temporal)."""

from __future__ import annotations

import math

import pytest

from agentsteps.contracts import (
    AgentSpec,
    DefaultResult,
    LLMConfig,
    LLMRequest,
    LLMToolCall,
    Message,
    ResponseFormat,
    ToolSchema,
    ViolationKind,
)
from agentsteps.contracts.llm.pinning import SNAPSHOT_FORMS, check_model_pinned, is_pinned
from agentsteps.contracts.llm.preconditions import check_request
from agentsteps.contracts.llm.tokens import count_prompt_tokens, count_text_tokens
from agentsteps.contracts.spec_check import check_spec

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

K = ViolationKind
PINNED = "gpt-4o-2024-08-06"
WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def config(**overrides) -> LLMConfig:
    return LLMConfig(**{"model": PINNED, "max_tokens": 256, "context_window": 8_000, **overrides})


def request(messages=None, **overrides) -> LLMRequest:
    fields = {
        "config": config(),
        "messages": messages if messages is not None else [Message.system("be brief"), Message.user("weather?")],
        "tools": [WEATHER],
        **overrides,
    }
    return LLMRequest(**fields)


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Paris"}') -> LLMToolCall:
    return LLMToolCall(id=call_id, name=name, arguments=arguments)


def assistant_calls(*ids: str) -> Message:
    return Message(role="assistant", tool_calls=[call(i) for i in ids])


def answer(call_id: str | None) -> Message:
    return Message(role="tool", tool_call_id=call_id, name="get_weather", content='{"temp": 21}')


def kinds(violations) -> list[ViolationKind]:
    return [v.kind for v in violations]


def only(violations, kind: ViolationKind):
    matching = [v for v in violations if v.kind == kind]
    assert len(matching) == 1, violations
    return matching[0]


# ---------------------------------------------------------------- tokens


def test_text_tokens_use_o200k_base():
    assert count_text_tokens("hello world") == 2
    assert count_text_tokens("") == 0
    assert count_text_tokens(None) == 0


def test_special_token_markers_are_counted_as_text_not_rejected():
    assert count_text_tokens("<|endoftext|>") > 1


def test_prompt_tokens_add_cookbook_overhead_per_message_and_reply():
    one_user = LLMRequest(config=config(), messages=[Message.user("hello world")])
    # 3 framing + 1 for "user" + 2 for the text + 3 priming the reply.
    assert count_prompt_tokens(one_user) == 9


def test_prompt_tokens_count_tools_and_tool_calls():
    base = LLMRequest(config=config(), messages=[Message.user("hello world")])
    with_tool = base.model_copy(update={"tools": [WEATHER]})
    with_call = with_tool.model_copy(
        update={"messages": [Message.user("hello world"), assistant_calls("c1"), answer("c1")]}
    )
    assert count_prompt_tokens(with_tool) > count_prompt_tokens(base) + 10
    assert count_prompt_tokens(with_call) > count_prompt_tokens(with_tool) + 10


def test_prompt_tokens_handle_texts_beyond_the_tokenizer_call_limit():
    huge = LLMRequest(config=config(), messages=[Message.user("hello there, how are you? " * 80_000)])
    assert count_prompt_tokens(huge) > 400_000


# ---------------------------------------------------------------- model pinning

PINNED_NAMES = [  # (provider, model): a snapshot suffix of that provider's documented forms
    ("openai", "gpt-4o-2024-08-06"),
    ("openai", "scripted-2026-01-01"),
    ("openai", "gpt-4-0613"),
    ("openai", "gpt-4-1106-preview"),
    ("openai", "mistral-large-2411"),
    ("openai", "gemini-1.5-pro-002"),
    ("openai", "claude-3-5-sonnet-20241022"),
    ("openai", "ft:gpt-4o-mini-2024-07-18:acme::abc123"),
    ("anthropic", "claude-3-5-sonnet-20241022"),
    ("anthropic", "claude-sonnet-4-5-20250929"),
    ("anthropic", "claude-3-5-sonnet-v2@20241022"),
]
ALIASES = [
    "gpt-4o",
    "gpt-4",
    "gpt-4o-mini",
    "gpt-4-32k",
    "claude-3-5-sonnet",
    "claude-sonnet-4",
    "llama3",
    "o3-mini",
    "gemini-1.5-pro",
]
# Version-looking names the old heuristic let through: families and mutable tags, not snapshots.
NOT_SNAPSHOTS = [
    ("openai", "deepseek-v3"),
    ("openai", "mymodel:prod"),
    ("openai", "gpt-4o:foo"),
    ("openai", "llama3.1:8b"),
    ("openai", "qwen2.5:7b-instruct-q4_K_M"),
    ("openai", "qwen2.5-7b-instruct-q4"),
    ("openai", "scripted-model-v1"),
    ("openai", "mistral-7b-instruct-v0.3"),
    ("openai", "meta-llama/Llama-3.1-8B-Instruct"),
    ("openai", "gpt-4o-2024-13-45"),  # not a date
    ("openai", "gpt-4o-20241399"),
    ("openai", "ft:gpt-4o-mini"),
    ("anthropic", "claude-sonnet-4-5-2025-09-29"),  # OpenAI's form, not Anthropic's
    ("anthropic", "claude-3-opus-0613"),
    ("anthropic", "claude-sonnet-4-5-20250931"),  # no 31 September
    ("anthropic", "claude-opus-4-1"),
]
LATEST = ["latest", "gpt-4o-latest", "chatgpt-4o-latest", "claude-3-5-sonnet-latest", "llama3:latest", "LATEST"]


@pytest.mark.parametrize(("provider", "model"), PINNED_NAMES)
def test_snapshot_suffixes_of_the_providers_forms_count_as_pinned(provider, model):
    assert check_model_pinned(LLMConfig(provider=provider, model=model), [], "$.config") == []


@pytest.mark.parametrize(("provider", "model"), NOT_SNAPSHOTS)
def test_version_looking_names_without_a_snapshot_suffix_are_not_pinned(provider, model):
    [v] = check_model_pinned(LLMConfig(provider=provider, model=model), [], "$.config")
    assert v.kind == K.unpinned_model and v.path == "$.config.model"
    assert model in v.message and "allowed_model_aliases" in v.message
    # The operator's list is the other way in.
    assert check_model_pinned(LLMConfig(provider=provider, model=model), [model], "$.config") == []


def test_every_documented_form_is_named_in_the_message():
    [v] = check_model_pinned(LLMConfig(provider="anthropic", model="claude-opus-4-1"), [], "$.config")
    assert all(form in v.message for form in SNAPSHOT_FORMS["anthropic"])


@pytest.mark.parametrize("model", ALIASES)
def test_bare_aliases_are_rejected_naming_field_and_value(model):
    [v] = check_model_pinned(LLMConfig(model=model), [], "$.config")
    assert v.kind == K.unpinned_model
    assert v.path == "$.config.model"
    assert model in v.message and "alias" in v.message
    assert (v.contract, v.phase) == ("llm.call", "pre")


@pytest.mark.parametrize("model", LATEST)
def test_latest_is_rejected(model):
    [v] = check_model_pinned(LLMConfig(model=model), [], "$.model")
    assert v.kind == K.unpinned_model
    assert "latest" in v.message


@pytest.mark.parametrize("model", ["", "   "])
def test_empty_model_name_is_rejected(model):
    [v] = check_model_pinned(LLMConfig(model=model), [], "$.model")
    assert "empty" in v.message


@pytest.mark.parametrize("model", ["gpt-4o", "latest", "llama3:latest"])
def test_allow_listed_aliases_pass(model):
    assert check_model_pinned(LLMConfig(model=model), [model], "$.config") == []
    assert is_pinned(model, {model})


def test_allow_list_is_exact_not_a_prefix():
    assert check_model_pinned(LLMConfig(model="gpt-4o-mini"), ["gpt-4o"], "$.config")


# ---------------------------------------------------------------- check_request: the happy path


def test_a_well_formed_tool_conversation_passes():
    messages = [
        Message.system("be brief"),
        Message.user("weather in Paris and Rome?"),
        assistant_calls("c1", "c2"),
        answer("c2"),
        answer("c1"),
        Message(role="assistant", content="Sunny in both."),
        Message.user("thanks"),
    ]
    assert check_request(request(messages)) == []


def test_request_without_system_message_passes():
    assert check_request(request([Message.user("hi")])) == []


# ---------------------------------------------------------------- check_request: role order


def test_system_message_after_the_conversation_started_is_rejected():
    v = only(check_request(request([Message.user("hi"), Message.system("late")])), K.invalid_role_order)
    assert v.path == "$.messages[1].role"


def test_only_system_messages_is_rejected():
    v = only(check_request(request([Message.system("alone")])), K.invalid_role_order)
    assert v.path == "$.messages"


def test_empty_message_list_is_rejected():
    assert kinds(check_request(request([]))) == [K.invalid_role_order]


def test_tool_message_without_a_matching_call_is_rejected():
    v = only(check_request(request([Message.user("hi"), answer("nope")])), K.invalid_role_order)
    assert v.path == "$.messages[1].tool_call_id"
    assert "nope" in v.message


def test_tool_message_without_tool_call_id_is_rejected():
    v = only(
        check_request(request([Message.user("hi"), assistant_calls("c1"), answer("c1"), answer(None)])),
        K.invalid_role_order,
    )
    assert v.path == "$.messages[3].tool_call_id"


def test_duplicate_answer_to_one_call_is_rejected():
    v = only(
        check_request(request([Message.user("hi"), assistant_calls("c1"), answer("c1"), answer("c1")])),
        K.invalid_role_order,
    )
    assert v.path == "$.messages[3].tool_call_id"
    assert "already answered" in v.message


def test_call_left_unanswered_when_the_user_speaks_is_rejected():
    v = only(
        check_request(request([Message.user("hi"), assistant_calls("c1", "c2"), answer("c1"), Message.user("?")])),
        K.invalid_role_order,
    )
    assert v.path == "$.messages[1].tool_calls[1].id"
    assert "c2" in v.message and "$.messages[3]" in v.message


def test_call_left_unanswered_at_the_end_is_rejected():
    v = only(check_request(request([Message.user("hi"), assistant_calls("c1")])), K.invalid_role_order)
    assert "end of the conversation" in v.message


def test_answer_after_the_next_assistant_turn_is_rejected():
    messages = [Message.user("hi"), assistant_calls("c1"), Message(role="assistant", content="x"), answer("c1")]
    violations = check_request(request(messages))
    assert [v.path for v in violations] == ["$.messages[1].tool_calls[0].id", "$.messages[3].tool_call_id"]


def test_reused_tool_call_id_is_rejected():
    messages = [Message.user("hi"), assistant_calls("c1"), answer("c1"), assistant_calls("c1"), answer("c1")]
    violations = check_request(request(messages))
    assert "$.messages[3].tool_calls[0].id" in [v.path for v in violations]


def test_tool_calls_on_a_user_message_are_rejected():
    bad = Message(role="user", content="hi", tool_calls=[call("c1")])
    v = only(check_request(request([bad])), K.invalid_role_order)
    assert v.path == "$.messages[0].tool_calls"


def test_tool_call_id_on_a_user_message_is_rejected():
    bad = Message(role="user", content="hi", tool_call_id="c1")
    v = only(check_request(request([bad])), K.invalid_role_order)
    assert v.path == "$.messages[0].tool_call_id"


def test_unknown_role_smuggled_past_pydantic_is_rejected():
    bad = Message.model_construct(role="developer", content="x", tool_calls=[], tool_call_id=None, name=None)
    violations = check_request(request([Message.user("hi"), bad]))
    assert violations[0].path == "$.messages[1].role"


def test_role_order_reports_are_capped():
    messages = [Message.user("hi")] + [answer(f"ghost{i}") for i in range(100)]
    assert len(check_request(request(messages))) == 5


# ---------------------------------------------------------------- check_request: config values


@pytest.mark.parametrize("temperature", [-0.1, 2.01, 3, math.nan, math.inf])
def test_temperature_outside_zero_to_two_is_rejected(temperature):
    v = only(check_request(request(config=config(temperature=temperature))), K.temperature_out_of_range)
    assert v.path == "$.config.temperature"


@pytest.mark.parametrize("temperature", [0, 0.0, 1.3, 2])
def test_temperature_bounds_are_inclusive(temperature):
    assert check_request(request(config=config(temperature=temperature))) == []


@pytest.mark.parametrize("max_tokens", [0, -5])
def test_non_positive_max_tokens_is_rejected(max_tokens):
    v = only(check_request(request(config=config(max_tokens=max_tokens))), K.invalid_max_tokens)
    assert v.path == "$.config.max_tokens"
    assert str(max_tokens) in v.message


def test_unpinned_model_in_request_is_rejected_unless_allow_listed():
    assert kinds(check_request(request(config=config(model="gpt-4o")))) == [K.unpinned_model]
    assert check_request(request(config=config(model="gpt-4o"), allowed_model_aliases=["gpt-4o"])) == []


# ---------------------------------------------------------------- check_request: context window


def test_prompt_plus_max_tokens_over_the_window_is_rejected():
    long = Message.user("word " * 3_000)
    v = only(check_request(request([long], config=config(max_tokens=5_000, context_window=8_000))), K.context_overflow)
    assert v.path == "$.messages"
    assert "8000" in v.message


def test_prompt_that_fits_with_max_tokens_passes():
    prompt = count_prompt_tokens(request())
    fits = config(max_tokens=8_000 - prompt, context_window=8_000)
    assert check_request(request(config=fits)) == []
    overflows = config(max_tokens=8_000 - prompt + 1, context_window=8_000)
    assert kinds(check_request(request(config=overflows))) == [K.context_overflow]


def test_prompt_plus_max_tokens_over_the_runs_remaining_budget_is_rejected_before_sending():
    prompt = count_prompt_tokens(request())
    limit = config(max_tokens=100)
    assert check_request(request(config=limit, token_allowance=prompt + 100)) == []
    v = only(check_request(request(config=limit, token_allowance=prompt + 99)), K.token_budget)
    assert v.path == "$.token_allowance"
    assert f"{prompt + 99} tokens left" in v.message


# ---------------------------------------------------------------- check_request: tool schemas


def tool(parameters, **extra) -> ToolSchema:
    return ToolSchema(name="t", parameters=parameters, **extra)


def test_tool_parameters_failing_the_metaschema_are_rejected_with_a_path_into_the_schema():
    bad = tool({"type": "object", "properties": {"city": {"type": "strin"}}})
    v = only(check_request(request(tools=[bad])), K.invalid_tool_schema)
    assert v.path == "$.tools[0].parameters.properties.city.type"
    assert "'strin'" in v.message and "string" in v.message


def test_tool_parameters_with_bad_required_are_rejected():
    v = only(check_request(request(tools=[tool({"type": "object", "required": "city"})])), K.invalid_tool_schema)
    assert v.path == "$.tools[0].parameters.required"


def test_tool_parameters_with_invalid_regex_are_rejected():
    bad = tool({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}})
    v = only(check_request(request(tools=[bad])), K.invalid_tool_schema)
    assert v.path.endswith(".pattern")


def test_tool_parameters_must_describe_an_object():
    v = only(check_request(request(tools=[tool({"type": "array"})])), K.invalid_tool_schema)
    assert v.path == "$.tools[0].parameters.type"
    assert '"object"' in v.message


def test_tool_parameters_that_are_not_a_dict_are_rejected_not_crashed_on():
    bad = ToolSchema.model_construct(name="t", description="", parameters=["not", "a", "schema"], output_schema=None)
    v = only(check_request(request(tools=[bad])), K.invalid_tool_schema)
    assert v.path == "$.tools[0].parameters"
    assert "array" in v.message


def test_tool_parameters_with_unresolvable_local_ref_are_rejected():
    bad = tool({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}})
    v = only(check_request(request(tools=[bad])), K.invalid_tool_schema)
    assert "#/$defs/missing" in v.message


def test_remote_ref_is_reported_unresolvable_and_never_fetched():
    bad = tool({"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/never.json"}}})
    v = only(check_request(request(tools=[bad])), K.invalid_tool_schema)
    assert "cannot be resolved" in v.message


def test_ref_cycle_that_consumes_no_input_is_rejected():
    v = only(check_request(request(tools=[tool({"type": "object", "$ref": "#"})])), K.invalid_tool_schema)
    assert "refers back to itself" in v.message


def test_local_refs_and_defs_resolve():
    good = tool(
        {
            "type": "object",
            "$defs": {"City": {"type": "string"}},
            "properties": {"a": {"$ref": "#/$defs/City"}, "b": {"items": {"$ref": "#"}}},
        }
    )
    assert check_request(request(tools=[good])) == []


def test_draft_07_schema_is_checked_against_its_own_metaschema():
    draft7 = tool(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "definitions": {"C": {"type": "string"}},
            "properties": {"c": {"$ref": "#/definitions/C"}},
        }
    )
    assert check_request(request(tools=[draft7])) == []


def test_deeply_nested_tool_schema_is_reported_not_crashed_on():
    schema: dict = {"type": "string"}
    for _ in range(5_000):
        schema = {"type": "object", "properties": {"a": schema}}
    deep = ToolSchema.model_construct(name="t", description="", parameters=schema, output_schema=None)
    violations = check_request(request(tools=[deep], config=config(context_window=1_000_000)))
    assert kinds(violations) == [K.invalid_tool_schema]


def test_tool_schema_with_nan_is_rejected():
    v = only(check_request(request(tools=[tool({"type": "object", "maximum": math.nan})])), K.invalid_tool_schema)
    assert "NaN" in v.message


def test_invalid_tool_output_schema_is_rejected():
    bad = tool({"type": "object"}, output_schema={"type": 5})
    v = only(check_request(request(tools=[bad])), K.invalid_tool_schema)
    assert v.path == "$.tools[0].output_schema.type"


def test_duplicate_tool_names_are_rejected():
    v = only(check_request(request(tools=[WEATHER, WEATHER])), K.invalid_tool_schema)
    assert v.path == "$.tools[1].name"


def test_metaschema_reports_are_capped():
    properties = {f"p{i}": {"type": f"bogus{i}"} for i in range(200)}
    violations = check_request(request(tools=[tool({"type": "object", "properties": properties})]))
    assert 1 <= len(violations) <= 5


def test_invalid_response_format_schema_is_rejected():
    bad = ResponseFormat(json_schema={"type": "object", "properties": {"a": {"minimum": "zero"}}})
    v = only(check_request(request(response_format=bad)), K.invalid_output_schema)
    assert v.path == "$.response_format.json_schema.properties.a.minimum"


def test_valid_response_format_passes():
    good = ResponseFormat(json_schema={"type": "object", "properties": {"answer": {"type": "string"}}})
    assert check_request(request(response_format=good)) == []


# ---------------------------------------------------------------- check_spec


def spec(**overrides) -> AgentSpec:
    return AgentSpec(**{"model": config(), "tools": ["get_weather"], **overrides})


KNOWN = {"get_weather": WEATHER}


def test_valid_spec_passes():
    full = spec(
        fallback_models=[config(model="claude-sonnet-4-5-20250929", provider="anthropic")],
        output_schema={"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
        default_result=DefaultResult(value={"answer": "unknown"}),
    )
    assert check_spec(full, KNOWN) == []


def test_spec_with_unknown_tool_names_the_entry():
    v = only(check_spec(spec(tools=["get_weather", "launch_rockets"]), KNOWN), K.unknown_tool_in_spec)
    assert v.path == "$.tools[1]"
    assert "launch_rockets" in v.message and "get_weather" in v.message
    assert (v.contract, v.phase) == ("agent_spec", "pre")


def test_spec_with_temperature_3_names_the_field():
    v = only(check_spec(spec(model=config(temperature=3)), KNOWN), K.temperature_out_of_range)
    assert v.path == "$.model.temperature"
    assert "3" in v.message


def test_spec_with_model_latest_names_the_field():
    v = only(check_spec(spec(model=config(model="latest")), KNOWN), K.unpinned_model)
    assert v.path == "$.model.model"
    assert v.contract == "agent_spec"


def test_spec_alias_allowed_by_the_spec_passes():
    assert check_spec(spec(model=config(model="gpt-4o"), allowed_model_aliases=["gpt-4o"]), KNOWN) == []


def test_spec_checks_every_fallback_model():
    fallbacks = [config(), config(model="claude-sonnet-4", max_tokens=0)]
    violations = check_spec(spec(fallback_models=fallbacks), KNOWN)
    assert sorted(v.path for v in violations) == ["$.fallback_models[1].max_tokens", "$.fallback_models[1].model"]


def test_spec_context_window_must_exceed_max_tokens():
    v = only(check_spec(spec(model=config(max_tokens=9_000, context_window=8_000)), KNOWN), K.context_overflow)
    assert v.path == "$.model.context_window"


def test_spec_with_a_bad_tool_schema_names_the_tool_entry():
    broken = {"get_weather": tool({"type": "object", "properties": {"city": {"type": "strin"}}})}
    v = only(check_spec(spec(), broken), K.invalid_tool_schema)
    assert v.path == "$.tools[0]"
    assert "properties.city.type" in v.message


def test_spec_with_invalid_output_schema_is_rejected():
    v = only(check_spec(spec(output_schema={"type": "object", "required": [1]}), KNOWN), K.invalid_output_schema)
    assert v.path.startswith("$.output_schema.required")


def test_spec_default_result_must_match_the_output_schema():
    bad = spec(
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        default_result=DefaultResult(value={"n": "many"}),
    )
    v = only(check_spec(bad, KNOWN), K.response_schema_mismatch)
    assert v.path == "$.default_result.value.n"


@pytest.mark.parametrize(("field", "value"), [("max_steps", 0), ("reprompt_budget", -1), ("token_budget", 0)])
def test_spec_budgets_out_of_range_are_rejected(field, value):
    v = only(check_spec(spec(**{field: value}), KNOWN), K.invalid_budget)
    assert v.path == f"$.{field}"
    assert str(value) in v.message


def test_spec_reprompt_budget_zero_is_allowed():
    assert check_spec(spec(reprompt_budget=0), KNOWN) == []
