"""Context that outgrows the window: the ``truncate`` and ``summarize`` policies (pure parts).

When a request does not fit (prompt + ``max_tokens`` over ``context_window``)
and its spec declares a policy, the ``llm.call`` activity compacts it before
the precondition runs:

- ``truncate`` keeps the system message and the latest turns that fit. A turn
  starts at a user message and holds everything up to the next one, so a tool
  call is never split from its result.
- ``summarize`` asks the model, under a contract (``SUMMARY_SCHEMA``, checked
  like any answer), for a summary of the turns ``truncate`` would drop; the
  summary joins the system message and replaces them. A violated or failed
  summary falls back to ``truncate``.

The precondition is still checked on the compacted request, so it holds on
every call; a latest turn that alone does not fit still fails typed.
"""

from __future__ import annotations

import json

from .messages import Message
from .prefix import Folds
from .request import ContextAction, LLMConfig, LLMRequest, ResponseFormat
from .tokens import count_message_tokens, count_prompt_tokens, count_text_tokens, prompt_tokens_upper_bound

SUMMARY_MARK = "Summary of the earlier conversation (older turns were replaced by it):"
SUMMARY_SCHEMA = {
    "type": "object",
    "required": ["summary"],
    "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": 8000}},
    "additionalProperties": False,
}
SUMMARY_INSTRUCTIONS = (
    "Summarize the conversation below for yourself, to continue it later without it. Keep every fact, "
    'identifier, number, decision and open question; drop pleasantries. Answer with JSON: {"summary": "..."}.'
)


def fits(request: LLMRequest, folds: Folds | None = None) -> bool:
    room = request.config.context_window - request.config.max_tokens
    # The byte bound proves most requests fit without tokenizing the whole history again.
    return prompt_tokens_upper_bound(request, folds) <= room or count_prompt_tokens(request, folds) <= room


def split_turns(messages: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Leading system messages, then the turns (each from a user message to the next)."""
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    turns: list[list[Message]] = []
    for message in messages[head:]:
        if message.role == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return messages[:head], turns


def keep_latest(request: LLMRequest, system: list[Message]) -> tuple[list[list[Message]], list[list[Message]]]:
    """(dropped, kept): the latest turns that fit after ``system``; the last turn is always kept."""
    _, turns = split_turns(request.messages)
    budget = request.config.context_window - request.config.max_tokens
    fixed = count_prompt_tokens(request.model_copy(update={"messages": system}))
    kept: list[list[Message]] = []
    used = fixed
    for turn in reversed(turns):
        size = sum(count_message_tokens(m) for m in turn)
        if kept and used + size > budget:
            break
        kept.insert(0, turn)
        used += size
    return turns[: len(turns) - len(kept)], kept


def truncated(request: LLMRequest) -> tuple[LLMRequest, ContextAction]:
    system, _ = split_turns(request.messages)
    dropped, kept = keep_latest(request, system)
    messages = [*system, *(m for t in kept for m in t)]
    action = ContextAction(action="truncated", dropped_messages=sum(len(t) for t in dropped))
    return request.model_copy(update={"messages": messages}), action


def summary_request(request: LLMRequest, dropped: list[list[Message]], earlier: str = "") -> LLMRequest:
    """The contracted call that summarizes ``dropped`` (after ``earlier``, a previous summary); cut to fit."""
    config: LLMConfig = request.config
    room = max(256, config.context_window - config.max_tokens - count_text_tokens(SUMMARY_INSTRUCTIONS) - 512)
    text = (f"(summary so far) {earlier}\n" if earlier else "") + "\n".join(_render(m) for t in dropped for m in t)
    while count_text_tokens(text) > room:
        text = text[len(text) // 8 :]  # the oldest part goes first
    return LLMRequest(
        config=config,
        messages=[Message.system(SUMMARY_INSTRUCTIONS), Message.user(text)],
        response_format=ResponseFormat(name="summary", json_schema=SUMMARY_SCHEMA),
        allowed_model_aliases=request.allowed_model_aliases,
    )


def summarized(request: LLMRequest, summary: str) -> tuple[LLMRequest, int]:
    """``request`` with the older turns replaced by ``summary`` in the system message; returns messages dropped."""
    system, _ = split_turns(request.messages)
    base = (system[0].content or "").split(f"\n\n{SUMMARY_MARK}")[0] if system else ""
    head = [Message.system(f"{base}\n\n{SUMMARY_MARK}\n{summary}"), *system[1:]]
    dropped, kept = keep_latest(request, head)
    messages = [*head, *(m for t in kept for m in t)]
    return request.model_copy(update={"messages": messages}), sum(len(t) for t in dropped)


def earlier_summary(request: LLMRequest) -> str:
    """A summary an earlier compaction left in the system message (summaries build on it)."""
    system, _ = split_turns(request.messages)
    content = system[0].content or "" if system else ""
    return content.split(f"\n\n{SUMMARY_MARK}\n", 1)[1] if f"\n\n{SUMMARY_MARK}\n" in content else ""


def _render(message: Message) -> str:
    calls = "".join(f" [calls {c.name}({c.arguments})]" for c in message.tool_calls)
    return f"{message.role}: {message.content or ''}{calls}"


def parse_summary(content: str | None) -> str:
    return str(json.loads(content or "{}")["summary"])


__all__ = [
    "SUMMARY_MARK",
    "SUMMARY_SCHEMA",
    "earlier_summary",
    "fits",
    "keep_latest",
    "parse_summary",
    "split_turns",
    "summarized",
    "summary_request",
    "truncated",
]
