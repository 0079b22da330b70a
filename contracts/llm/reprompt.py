"""How a violated answer is shown back to the model.

The model reads the exact violation text. When the bad answer carried tool
calls, each call is answered by an error tool message, so the history stays in
a legal role order (no tool call left unanswered) for the next request.
"""

from __future__ import annotations

from ..violations import Violation
from .messages import LLMToolCall, Message

ECHO_LIMIT = 2_000
"""A rejected answer is echoed back at most this long, so a hostile or runaway
answer cannot push the re-prompt past the context window."""

REPROMPT_HEADER = "Your previous answer broke the response contract and was not used."


def violation_report(violations: list[Violation]) -> str:
    lines = "\n".join(f"- {v.for_model()}" for v in violations)
    return f"{REPROMPT_HEADER}\n{lines}\nFix these problems and answer again."


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= ECHO_LIMIT:
        return text
    return f"{text[:ECHO_LIMIT]}... [{len(text) - ECHO_LIMIT} more characters cut]"


def reprompt_messages(bad_answer: Message, violations: list[Violation]) -> list[Message]:
    report = violation_report(violations)
    bad_answer = bad_answer.model_copy(
        update={
            "content": _clip(bad_answer.content),
            "tool_calls": tuple(
                LLMToolCall(id=c.id, name=c.name, arguments=_clip(c.arguments) or "") for c in bad_answer.tool_calls
            ),
        }
    )
    if not bad_answer.tool_calls:
        return [bad_answer, Message.user(report)]
    replies = [
        Message(role="tool", tool_call_id=call.id, name=call.name, is_error=True, content=report)
        for call in bad_answer.tool_calls
    ]
    return [bad_answer, *replies]
