"""Postconditions: checked on the provider's answer, inside the ``llm.call`` activity.

Violations are returned as values; the workflow re-prompts with their text, so
every message is written for the model: what was wrong, quoting jsonschema's
own words, and what is expected instead.

Paths are rooted at the response as the model sees it: ``$.tool_calls[0].name``,
``$.tool_calls[0].arguments.city``, ``$.content.answer``, ``$.usage.total_tokens``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..json_schema import MAX_ERRORS, clip, describe, instance_violations, parse_json
from ..names import LLM_CALL
from .arguments import parse_tool_arguments
from .request import LLMRequest, LLMResponse
from .tools import ToolSchema
from .violations import Violation, ViolationKind

CONTRACT = LLM_CALL  # the LLM contract is named after its activity

_K = ViolationKind


def _post(kind: ViolationKind, path: str, message: str, contract: str = CONTRACT) -> Violation:
    return Violation(contract=contract, phase="post", kind=kind, path=path, message=clip(message))


def _check_tool_calls(request: LLMRequest, response: LLMResponse) -> list[Violation]:
    tools = {t.name: t for t in request.tools}
    available = ", ".join(sorted(tools)) or "none (answer without calling a tool)"
    out: list[Violation] = []
    for i, call in enumerate(response.message.tool_calls):
        if len(out) >= MAX_ERRORS:
            break
        at = f"$.tool_calls[{i}]"
        tool = tools.get(call.name)
        if tool is None:
            out.append(
                _post(
                    _K.unknown_tool,
                    f"{at}.name",
                    f"there is no tool named {describe(call.name)}; call one of: {clip(available, 200)}",
                )
            )
            continue
        arguments, error = parse_tool_arguments(call.arguments)
        if error is not None:
            out.append(
                _post(
                    _K.tool_arguments_not_json,
                    f"{at}.arguments",
                    f"the arguments for tool {describe(call.name)} are not usable: {error}. "
                    "Send the arguments as one JSON object matching the tool's parameters.",
                )
            )
            continue
        out += instance_violations(
            arguments,
            tool.parameters,
            contract=CONTRACT,
            phase="post",
            kind=_K.tool_arguments_invalid,
            path=f"{at}.arguments",
            what=f"arguments for tool {describe(call.name)}",
        )
    return out


def _check_content(request: LLMRequest, response: LLMResponse) -> list[Violation]:
    message = response.message
    content = message.content if isinstance(message.content, str) else None
    if message.tool_calls:
        return []
    if content is None or not content.strip():
        return [
            _post(
                _K.empty_response,
                "$.content",
                "the reply has neither text nor tool calls; answer the user or call a tool",
            )
        ]
    if request.response_format is None:
        return []
    value, error = parse_json(content)
    if error is not None:
        hint = " Do not wrap it in a code fence." if content.lstrip().startswith("```") else ""
        return [
            _post(
                _K.response_not_json,
                "$.content",
                f"the final answer must be one JSON document matching the response schema, but {error}.{hint}",
            )
        ]
    return instance_violations(
        value,
        request.response_format.json_schema,
        contract=CONTRACT,
        phase="post",
        kind=_K.response_schema_mismatch,
        path="$.content",
        what="final answer",
    )


def _check_usage(response: LLMResponse) -> list[Violation]:
    usage = response.usage
    out = []
    counts = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    for field, value in counts.items():
        if not isinstance(value, int) or value < 0:
            message = f"{field} is {describe(value)}; it must be >= 0"
            out.append(_post(_K.usage_inconsistent, f"$.usage.{field}", message))
    if not out and usage.total_tokens != usage.prompt_tokens + usage.completion_tokens:
        out.append(
            _post(
                _K.usage_inconsistent,
                "$.usage.total_tokens",
                f"total_tokens {usage.total_tokens} != prompt_tokens {usage.prompt_tokens} + "
                f"completion_tokens {usage.completion_tokens}",
            )
        )
    return out


def check_response(request: LLMRequest, response: LLMResponse) -> list[Violation]:
    """The ``llm.call`` postconditions; an empty list means the answer may be used."""
    out: list[Violation] = []
    if response.finish_reason == "length":
        out.append(
            _post(
                _K.truncated,
                "$.finish_reason",
                f"the reply was cut off at max_tokens ({request.config.max_tokens}); "
                "give a shorter answer that fits",
            )
        )
    if response.message.role != "assistant":
        out.append(
            _post(
                _K.invalid_role_order,
                "$.role",
                f"the reply must be an assistant message, got role {describe(response.message.role)}",
            )
        )
    out += _check_tool_calls(request, response)[:MAX_ERRORS]
    out += _check_content(request, response)
    out += _check_usage(response)
    return out


def check_tool_output(tool: ToolSchema, value: Any) -> list[Violation]:
    """A tool's result against its ``output_schema``; paths are rooted at the result (``$``)."""
    if tool.output_schema is None:
        return []
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return instance_violations(
        value,
        tool.output_schema,
        contract=f"tool.{tool.name}",
        phase="post",
        kind=_K.tool_output_invalid,
        path="$",
        what=f"result of tool {describe(tool.name)}",
    )


__all__ = ["CONTRACT", "check_response", "check_tool_output"]
