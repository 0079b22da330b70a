"""A tool-mode step's next model call, carried by its only ``tools.call`` (issue 39).

A step whose model asked for one tool that a retry cannot harm (``delivery`` ``retry``, no side effects, no
approval) hands the next ``llm.call``'s request to that call's activity. Once the tool has answered, the
activity appends the tool message and makes the model call on its own worker, so a step costs one activity,
as it does in a hand-written loop that calls the model and the tool in one. The answer comes back in the
result (``CarryingCallResult.next_answer``) and the workflow takes it as it takes an ``llm.call`` result;
an activity that cannot make the call (an older worker, a provider failure, no time left) returns the tool's
result alone and the workflow makes the ``llm.call`` itself, as it always did.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from .request import LLMRequest, LLMResponse


class NextModelCall(BaseModel):
    request: LLMRequest
    """The next ``llm.call``'s request as it would go into history, but for its last message: the tool message
    of this call's result (``tool_message(result, tool_cap)``), which the activity appends."""
    tool_cap: int | None = None
    """Where that tool message is cut, as the workflow cuts it."""
    seconds: float = Field(gt=0)
    """The model call's own start-to-close timeout: the activity makes it only while that much time is left."""


class NextModelAnswer(BaseModel):
    response: LLMResponse
    """What ``llm.call`` would have returned for the request."""
    seconds: float = Field(ge=0)
    """How long the model call took inside the activity (the step's own time, on its record)."""
