"""Postconditions: checked on the provider's answer, inside the ``llm.call`` activity.

Violations are returned as values; the workflow re-prompts with their text, so
every message is written for the model: what was wrong, quoting jsonschema's
own words, and what is expected instead.

Paths are rooted at the response as the model sees it: ``$.tool_calls[0].name``,
``$.tool_calls[0].arguments.city``, ``$.content.answer``, ``$.usage.total_tokens``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from ..json_schema import MAX_ERRORS, clip, describe, instance_violations, parse_json
from ..names import LLM_CALL
from ..violations import Violation, ViolationKind
from .arguments import parse_tool_arguments
from .request import LLMRequest, LLMResponse
from .tools import ToolSchema

CONTRACT = LLM_CALL  # the LLM contract is named after its activity

_K = ViolationKind
_SNAPSHOT_SUFFIX = re.compile(r"\d{4}-\d{2}-\d{2}|\d{8}|v?\d+(\.\d+)*")


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


_STOP_KINDS: dict[str, ViolationKind] = {
    "length": _K.truncated,
    "context_window_exceeded": _K.truncated,
    "refusal": _K.refusal,
    "content_filter": _K.content_filtered,
    "pause_turn": _K.incomplete,
    "other": _K.incomplete,
}


def _check_stop(request: LLMRequest, response: LLMResponse) -> list[Violation]:
    """Only ``stop`` and ``tool_calls`` end a turn; any other reason makes the (partial) answer unusable."""
    refusal = response.refusal
    kind = _K.refusal if refusal is not None else _STOP_KINDS.get(response.finish_reason)
    if kind is None:
        return []
    said = clip(refusal or response.message.content or "", 500)
    quoted = f" The provider said: {said!r}." if said else ""
    if kind is _K.refusal:
        message = f"the model refused to answer.{quoted} Answer within the rules, or say plainly why you cannot"
    elif kind is _K.content_filtered:
        message = f"the provider's content filter stopped the reply.{quoted} Rephrase the answer"
    elif response.finish_reason == "length":
        message = f"the reply was cut off at max_tokens ({request.config.max_tokens}); give a shorter answer that fits"
    elif kind is _K.truncated:
        message = "the reply was cut off at the model's context window; give a shorter answer that fits"
    else:
        message = (
            f"the reply stopped before it was finished (stop reason {response.finish_reason!r}); answer again in full"
        )
    return [_post(kind, "$.finish_reason", message)]


def served_model_matches(pinned: str, served: str) -> bool:
    """The served model is the pinned one, or its dated snapshot.

    Rule (both providers): ``served == pinned``, or ``served`` is ``pinned`` plus
    ``-`` and a date (``-2024-08-06``, ``-20250929``) or version (``-v2``, ``-001``)
    suffix: OpenAI and Anthropic report the dated snapshot an alias resolved to.
    An empty ``served`` (the provider reported none) cannot be checked and passes.
    """
    if not served or served == pinned:
        return True
    return served.startswith(pinned + "-") and _SNAPSHOT_SUFFIX.fullmatch(served[len(pinned) + 1 :]) is not None


def _check_served_model(request: LLMRequest, response: LLMResponse) -> list[Violation]:
    pinned = request.config.model
    if served_model_matches(pinned, response.model):
        return []
    return [
        _post(
            _K.served_model,
            "$.model",
            f"the provider served model {describe(response.model)}, not the pinned {describe(pinned)}",
        )
    ]


def check_response(request: LLMRequest, response: LLMResponse) -> list[Violation]:
    """The ``llm.call`` postconditions; an empty list means the answer may be used."""
    out = _check_served_model(request, response)
    stop = _check_stop(request, response)
    out += stop
    if response.message.role != "assistant":
        out.append(
            _post(
                _K.invalid_role_order,
                "$.role",
                f"the reply must be an assistant message, got role {describe(response.message.role)}",
            )
        )
    out += _check_tool_calls(request, response)[:MAX_ERRORS]
    # A refused or filtered reply is judged by its stop alone: an empty text there is not a second problem.
    if not any(v.kind in (_K.refusal, _K.content_filtered) for v in stop):
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


__all__ = ["CONTRACT", "check_response", "check_tool_output", "served_model_matches"]
