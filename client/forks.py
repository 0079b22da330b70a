"""Forking a recorded run: a new run from another's conversation before step N, its effects never repeated.

The source's steps (from its result in history, or the steps query while it
is open) rebuild the conversation the model had before step ``at_step``;
every side effect the source made goes with the fork (``ForkOrigin.effects``),
so the fork's model is told of them and an identical call is answered from the
record. The source run is only read. Tool mode only: a code-mode fork would
also need the program's memory at that step.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from temporalio.client import Client, WorkflowHandle
from temporalio.converter import DataConverter

from ..contracts import AgentInput, AgentResult, AgentSpec, ForkOrigin, InvalidSpecError, Message, Step
from ..contracts.llm.messages import LLMToolCall
from ..contracts.names import AGENT_WORKFLOW, STEPS_QUERY
from ..contracts.violations import Violation, ViolationKind
from .counterfactual import new_spec, read_recorded_run
from .replay_check import fetch_history


def _bad(path: str, message: str) -> InvalidSpecError:
    return InvalidSpecError([Violation(contract="fork", phase="pre", kind=ViolationKind.invalid_config, path=path, message=message)])


def conversation_before(user_input: str, steps: Sequence[Step], at_step: int) -> list[Message]:
    """The messages after the system prompt that the model had before step ``at_step``."""
    messages = [Message.user(user_input)]
    for step in steps[:at_step]:
        if step.kind != "tool_call" or not step.tool_calls:
            continue  # an assistant text or a violated answer the ladder replaced: not in the conversation
        messages.append(Message(role="assistant", content=step.content, tool_calls=tuple(
            LLMToolCall(id=c.call_id, name=c.name, arguments=c.arguments) for c in step.tool_calls)))
        messages += [Message(role="tool", content=c.content, tool_call_id=c.call_id, name=c.name, is_error=c.is_error)
                     for c in step.tool_calls]
    return messages


async def fork_run(
    client: Client,
    workflow_id: str,
    at_step: int,
    *,
    data_converter: DataConverter,
    task_queue: str,
    spec: AgentSpec | None = None,
    model: str | None = None,
    user_input: str | None = None,
    fork_id: str | None = None,
) -> WorkflowHandle[object, AgentResult]:
    """Start the fork of ``workflow_id`` at ``at_step`` (0: from the user input) and return its handle."""
    source = await read_recorded_run(await fetch_history(client, workflow_id), data_converter)
    result = source.result
    if result is None:  # still open: the steps so far (effects are then those in its steps)
        steps = await client.get_workflow_handle(workflow_id).query(STEPS_QUERY, 0, result_type=list[Step])
        result = AgentResult(status="running", steps=steps)
    if source.inp.spec.mode == "code" or (spec is not None and spec.mode == "code"):
        raise _bad("--at-step", "forking a code-mode run is not supported yet: the program's memory is not restored")
    if at_step < 0 or at_step > len(result.steps):
        raise _bad("--at-step", f"run {workflow_id} has steps 0..{len(result.steps) - 1}; --at-step must be 0..{len(result.steps)}")
    messages = conversation_before(source.inp.input, result.steps, at_step)
    if user_input is not None:
        messages = [Message.user(user_input)] if at_step == 0 else [*messages, Message.user(user_input)]
    origin = ForkOrigin(workflow_id=workflow_id, at_step=at_step, messages=messages, effects=result.effects)
    inp = AgentInput(spec=new_spec(source.inp.spec, spec, model), input=source.inp.input, fork=origin)
    return await client.start_workflow(
        AGENT_WORKFLOW, inp, id=fork_id or f"{workflow_id}-fork{at_step}-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue, result_type=AgentResult,
    )
