"""Preconditions: checked before any provider call.

A non-empty result means no HTTP request is sent. Each check returns
``Violation`` values whose path names the offending field and whose message
quotes the bad value and says what is expected.

``check_request`` is the ``llm.call`` contract's Pre. The static part of it
that can be decided from an AgentSpec alone, before a run starts, is
``contracts/spec_check.py``'s ``check_spec``, built from ``check_config`` and
``check_tool_schemas`` here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..json_schema import MAX_ERRORS, clip, describe, schema_violations
from ..violations import Violation, ViolationKind
from .api_keys import key_name_problem
from .messages import Message
from .pinning import CONTRACT, check_model_pinned
from .prefix import Folds, fold
from .request import LLMConfig, LLMRequest
from .tokens import count_prompt_tokens, prompt_tokens_upper_bound
from .tools import ToolSchema

TEMPERATURE_RANGE = (0.0, 2.0)
ROLES = frozenset({"system", "user", "assistant", "tool"})

_K = ViolationKind


def pre_violation(kind: ViolationKind, path: str, message: str, contract: str = CONTRACT) -> Violation:
    return Violation(contract=contract, phase="pre", kind=kind, path=path, message=clip(message))


# ---------------------------------------------------------------- config values


def check_config(
    config: LLMConfig, allowed_aliases: Iterable[str], path: str, contract: str = CONTRACT
) -> list[Violation]:
    """Model pinned, temperature in [0, 2], max_tokens > 0 and below the context window, a plain key name."""
    out = [v.model_copy(update={"contract": contract}) for v in check_model_pinned(config, allowed_aliases, path)]
    key_problem = key_name_problem(config.api_key)
    if key_problem is not None:
        out.append(pre_violation(_K.invalid_config, f"{path}.api_key", key_problem, contract))
    low, high = TEMPERATURE_RANGE
    t = config.temperature
    # Unset means the model's default; nothing is sent.
    if t is not None and not (isinstance(t, int | float) and math.isfinite(t) and low <= t <= high):
        out.append(
            pre_violation(
                _K.temperature_out_of_range,
                f"{path}.temperature",
                f"temperature is {describe(t)}; it must be a number from {low:g} to {high:g}",
                contract,
            )
        )
    if not (isinstance(config.max_tokens, int) and config.max_tokens > 0):
        out.append(
            pre_violation(
                _K.invalid_max_tokens,
                f"{path}.max_tokens",
                f"max_tokens is {describe(config.max_tokens)}; it must be a positive integer",
                contract,
            )
        )
    if not (isinstance(config.context_window, int) and config.context_window > 0):
        out.append(
            pre_violation(
                _K.context_overflow,
                f"{path}.context_window",
                f"context_window is {describe(config.context_window)}; it must be a positive integer",
                contract,
            )
        )
    elif isinstance(config.max_tokens, int) and config.max_tokens >= config.context_window:
        out.append(
            pre_violation(
                _K.context_overflow,
                f"{path}.context_window",
                f"context_window {config.context_window} leaves no room for a prompt with "
                f"max_tokens {config.max_tokens}; it must be larger than max_tokens",
                contract,
            )
        )
    return out


# ---------------------------------------------------------------- message order


def check_messages(request: LLMRequest, folds: Folds | None = None) -> list[Violation]:
    """Roles valid and in a legal order, every tool call answered exactly once.

    - system messages only before the first non-system message;
    - at least one non-system message;
    - ``tool_calls`` only on assistant messages, ``tool_call_id`` only on tool messages;
    - a tool message answers a call id from an earlier assistant message that
      is still open; a second answer to the same id is a violation;
    - every call is answered before the next user or assistant message, and
      before the request ends.

    Checked as a fold (``_Order``), so a call resumes from the state its stored prefix left (``folds``).
    """
    order = fold(folds, "pre.order", request.messages, _Order, _Order.step, _Order.copy)
    order.close_open_calls("the end of the conversation")
    if not order.seen_non_system:
        order.flag("$.messages", "the request needs at least one user, assistant or tool message")
    return order.out[:MAX_ERRORS]


class _Order:
    """``check_messages``' state after some messages: violations so far, open, issued and answered call ids."""

    __slots__ = ("out", "open_calls", "issued", "answered", "seen_non_system", "index")

    def __init__(self) -> None:
        self.out: list[Violation] = []
        self.open_calls: dict[str, str] = {}  # id -> path of the call
        self.issued: set[str] = set()
        self.answered: set[str] = set()
        self.seen_non_system = False
        self.index = 0

    def copy(self) -> _Order:
        other = _Order()
        other.out, other.open_calls = list(self.out), dict(self.open_calls)
        other.issued, other.answered = set(self.issued), set(self.answered)
        other.seen_non_system, other.index = self.seen_non_system, self.index
        return other

    def flag(self, path: str, message: str) -> None:
        # Only the first MAX_ERRORS are ever reported, so a kept state holds no more than those.
        if len(self.out) < MAX_ERRORS:
            self.out.append(pre_violation(_K.invalid_role_order, path, message))

    def close_open_calls(self, before: str) -> None:
        for call_id, at in self.open_calls.items():
            self.flag(at, f"tool call {describe(call_id)} has no tool message answering it before {before}")
        self.open_calls.clear()

    def step(self, message: Message) -> _Order:
        at = f"$.messages[{self.index}]"
        self.index += 1
        flag = self.flag
        role = message.role
        if role not in ROLES:
            flag(f"{at}.role", f"role {describe(role)} is not one of system, user, assistant, tool")
            return self
        if role == "system":
            if self.seen_non_system:
                flag(f"{at}.role", "a system message may only appear before the first user, assistant or tool message")
        else:
            self.seen_non_system = True
        if message.tool_calls and role != "assistant":
            flag(f"{at}.tool_calls", f"only assistant messages may carry tool_calls, not a {role} message")
        if message.tool_call_id is not None and role != "tool":
            flag(f"{at}.tool_call_id", f"only tool messages may carry tool_call_id, not a {role} message")

        if role in ("user", "assistant"):
            self.close_open_calls(f"the {role} message at {at}")
        if role == "assistant":
            for k, call in enumerate(message.tool_calls):
                call_at = f"{at}.tool_calls[{k}].id"
                if not call.id:
                    flag(call_at, "a tool call needs a non-empty id")
                elif call.id in self.issued:
                    flag(call_at, f"tool call id {describe(call.id)} is used by an earlier tool call")
                else:
                    self.issued.add(call.id)
                    self.open_calls[call.id] = call_at
        elif role == "tool":
            call_id = message.tool_call_id
            if not call_id:
                flag(f"{at}.tool_call_id", "a tool message must name the tool call it answers in tool_call_id")
            elif call_id in self.open_calls:
                del self.open_calls[call_id]
                self.answered.add(call_id)
            elif call_id in self.answered:
                flag(f"{at}.tool_call_id", f"tool call {describe(call_id)} was already answered")
            else:
                flag(
                    f"{at}.tool_call_id",
                    f"tool_call_id {describe(call_id)} does not answer an open tool call of the "
                    "assistant message before it",
                )
        return self


# ---------------------------------------------------------------- tools and schemas


def check_tool_schemas(tools: Iterable[ToolSchema], path: str = "$.tools", contract: str = CONTRACT) -> list[Violation]:
    """Every tool's parameters is a valid JSON Schema of an object; names are unique."""
    out: list[Violation] = []
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        at = f"{path}[{i}]"
        if tool.name in seen:
            out.append(
                pre_violation(_K.invalid_tool_schema, f"{at}.name", f"tool name {describe(tool.name)} is listed twice")
            )
        seen.add(tool.name)
        out += schema_violations(
            tool.parameters,
            contract=contract,
            phase="pre",
            kind=_K.invalid_tool_schema,
            path=f"{at}.parameters",
            what=f"the parameters schema of tool {describe(tool.name)}",
            require_object=True,
        )
        if tool.output_schema is not None:
            out += schema_violations(
                tool.output_schema,
                contract=contract,
                phase="pre",
                kind=_K.invalid_tool_schema,
                path=f"{at}.output_schema",
                what=f"the output_schema of tool {describe(tool.name)}",
            )
    return out


def check_request(request: LLMRequest, folds: Folds | None = None) -> list[Violation]:
    """The ``llm.call`` preconditions; an empty list means the request may be sent.

    ``folds`` only saves work (see ``prefix``): the violations are the same with it and without.
    """
    out = check_messages(request, folds)
    out += check_config(request.config, request.allowed_model_aliases, "$.config")
    out += check_tool_schemas(request.tools)
    if request.response_format is not None:
        out += schema_violations(
            request.response_format.json_schema,
            contract=CONTRACT,
            phase="pre",
            kind=_K.invalid_output_schema,
            path="$.response_format.json_schema",
            what="the response format's json_schema",
        )
    max_tokens = request.config.max_tokens
    window = request.config.context_window
    bound = _Bound(request, folds)
    if isinstance(max_tokens, int) and isinstance(window, int) and 0 < max_tokens < window:
        prompt = bound.beyond(window - max_tokens)
        if prompt is not None:
            out.append(
                pre_violation(
                    _K.context_overflow,
                    "$.messages",
                    f"the prompt is about {prompt} tokens and max_tokens is {max_tokens}: {prompt + max_tokens} "
                    f"exceeds the context window of {window} tokens by {prompt + max_tokens - window}; "
                    "shorten the conversation or tool results, or lower max_tokens",
                )
            )
    allowance = request.token_allowance
    if allowance is not None and isinstance(max_tokens, int) and max_tokens > 0:
        prompt = bound.beyond(allowance - max_tokens)
        if prompt is not None:
            out.append(
                pre_violation(
                    _K.token_budget,
                    "$.token_allowance",
                    f"the prompt is about {prompt} tokens and max_tokens is {max_tokens}: {prompt + max_tokens} "
                    f"exceeds the {allowance} tokens left in the run's token budget",
                )
            )
    return out


class _Bound:
    """The prompt's size for the window and the budget checks, each measured at most once per request."""

    def __init__(self, request: LLMRequest, folds: Folds | None = None) -> None:
        self._request = request
        self._folds = folds
        self._upper: int | None = None
        self._exact: int | None = None

    def beyond(self, limit: int) -> int | None:
        """The prompt's token count when it exceeds ``limit``, else None.

        Tokenizes only when the cheap byte bound does not already prove the prompt
        fits, so a long history is not tokenized again at every step.
        """
        if self._upper is None:
            self._upper = prompt_tokens_upper_bound(self._request, self._folds)
        if self._upper <= limit:
            return None
        if self._exact is None:
            self._exact = count_prompt_tokens(self._request, self._folds)
        return self._exact if self._exact > limit else None


__all__ = [
    "CONTRACT",
    "check_config",
    "check_messages",
    "check_request",
    "check_tool_schemas",
    "pre_violation",
]
