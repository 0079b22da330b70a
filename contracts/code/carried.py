"""A ``tools.call`` that carries what comes after it (issue 39): a code-mode program, or a tool-mode step's next
model call (``contracts/llm/next_call.py``).

A paused program kept live on a worker waits on one tool call alone: the workflow hands the program to that
call's activity, which, once its tool has answered, resumes the program when it is live on its own worker and
returns the program's next pause with the tool's result. A sequential call then costs one activity, like a
direct tool call. The models extend ``ToolCallInput`` / ``ToolCallResult`` (the ``tools.call`` activity takes
and returns these), so a call without a program is the same payload as before.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..llm.next_call import NextModelAnswer, NextModelCall
from ..llm.tools import ToolCallInput, ToolCallResult, result_value
from .program import CallOutcome, ProgramStatus, ResumeProgramInput


class CarriedProgram(BaseModel):
    """A program paused on one tool call alone and kept live: handed to that call's ``tools.call`` activity,
    which, once its tool has answered, resumes the program on its own worker when it is live there and
    returns the program's next pause with the tool's result (``CarryingCallResult.program``), so a sequential
    call costs one activity. Not live there: the result comes alone and the workflow resumes as before."""

    call_id: int
    """The sandbox's id of the call; its outcome (``program_outcome`` of the tool's result) resumes it."""
    resume: ResumeProgramInput
    """As ``code.resume`` would be given it, ``live`` set and ``outcomes`` empty."""


class CarryingCallInput(ToolCallInput):
    """``tools.call``'s input; ``program`` only on a code-mode call its kept-live program waits on alone,
    ``next_call`` only on a tool-mode step's only call."""

    program: CarriedProgram | None = Field(default=None, exclude_if=lambda program: program is None)
    next_call: NextModelCall | None = Field(default=None, exclude_if=lambda call: call is None)


class CarryingCallResult(ToolCallResult):
    """``tools.call``'s result with the program it carried, resumed on that worker with this result's outcome:
    at its next pause or end, what ``code.resume`` would have answered. Only when the program was live there."""

    program: ProgramStatus | None = Field(default=None, exclude_if=lambda status: status is None)
    next_answer: NextModelAnswer | None = Field(default=None, exclude_if=lambda answer: answer is None)
    """The model's answer to ``CarryingCallInput.next_call``, made after the tool on that worker."""


def program_outcome(call_id: int, result: ToolCallResult) -> CallOutcome:
    """What a sandboxed program sees for a tool result: its value, or the error it raises."""
    if result.is_error:
        return CallOutcome(call_id=call_id, error=result.content)
    # Strict parsing: a hostile result nested 100k deep must not crash the workflow task.
    return CallOutcome(call_id=call_id, value=result_value(result))


def carried_pause(result: ToolCallResult) -> ProgramStatus | None:
    """The program's next pause a call's result carries, if any."""
    return result.program if isinstance(result, CarryingCallResult) else None


def the_call_alone(result: ToolCallResult) -> ToolCallResult:
    """The tool's result without what it carried (what the record of effects keeps)."""
    if not isinstance(result, CarryingCallResult):
        return result
    return ToolCallResult.model_validate(result.model_dump(exclude={"program", "next_answer"}))


def with_pause(result: ToolCallResult, status: ProgramStatus) -> CarryingCallResult:
    return CarryingCallResult.model_validate({**result.model_dump(), "program": status})


def with_next_answer(result: ToolCallResult, answer: NextModelAnswer) -> CarryingCallResult:
    return CarryingCallResult.model_validate({**result.model_dump(), "next_answer": answer})


def carried_answer(result: ToolCallResult) -> NextModelAnswer | None:
    """The next model call's answer a call's result carries, if any."""
    return result.next_answer if isinstance(result, CarryingCallResult) else None
