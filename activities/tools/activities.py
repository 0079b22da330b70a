"""The ``tools.describe`` and ``tools.call`` activities.

A tool's own failure (arguments that do not parse or validate, a ``ToolError``)
is returned as an error result so the model can read it and try again. Anything
else raises, so Temporal retries it and the failure shows in metrics.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity

from ...contracts import ToolCallInput, ToolCallResult, ToolError, ToolSchema
from ...contracts.code.carried import (
    CarriedProgram,
    CarryingCallInput,
    CarryingCallResult,
    with_next_answer,
    with_pause,
)
from ...contracts.code.program import ProgramStatus
from ...contracts.errors import ToolConfigError
from ...contracts.json_schema import json_path
from ...contracts.llm.arguments import parse_tool_arguments
from ...contracts.llm.next_call import NextModelAnswer, NextModelCall
from ...contracts.llm.request import LLMRequest, LLMResponse
from ...contracts.llm.tools import (
    STORED_MESSAGE_MIN_CHARS,
    ToolsDescribeInput,
    outcome_unknown,
    stored_once,
    tool_message,
)
from ...contracts.names import TOOLS_CALL, TOOLS_DESCRIBE
from ...contracts.tool_names import tool_name_collisions
from ...failures import to_application_error
from ...storage.conversations import ConversationStore, caller_owner
from ...telemetry.labels import TOOLS
from ...telemetry.metrics import NEXT_MODEL_CALLS, TOOL_CALL_SECONDS, TOOL_CALLS
from ...telemetry.tracing import tool_span
from .registry import PythonTool, ToolContext, ToolRegistry
from .source import ToolSource

ProgramResumer = Callable[[CarriedProgram, ToolCallResult], Awaitable[ProgramStatus | None]]
"""``SandboxActivities.resume_carried``: the program resumed with the result, or None when not live here."""
ModelCaller = Callable[[LLMRequest], Awaitable[LLMResponse]]
"""``LLMActivities.call``: what the ``llm.call`` activity answers for a request, on this worker."""


class ToolActivities:
    def __init__(
        self,
        registry: ToolRegistry,
        sources: Sequence[ToolSource] = (),
        conversations: ConversationStore | None = None,
        programs: ProgramResumer | None = None,
        models: ModelCaller | None = None,
    ) -> None:
        """``conversations``: where a call with ``store_for`` stores the tool message the model reads next.
        ``programs``: resumes a code-mode program kept live on this worker (``CarryingCallInput.program``).
        ``models``: makes the next model call a tool-mode step's call carries (``CarryingCallInput.next_call``)."""
        self._registry = registry
        self._sources = list(sources)
        self._conversations = conversations
        self._programs = programs
        self._models = models

    async def catalog(self) -> dict[str, ToolSchema]:
        """Every tool: the registry's, and every reachable one of each source (``agentsteps tools``)."""
        merged: dict[str, ToolSchema] = {}
        for source in self._sources:
            for schema in await source.describe():
                merged.setdefault(schema.name, schema)
        merged.update(self._registry.schemas())
        return merged

    @activity.defn(name=TOOLS_DESCRIBE)
    async def describe(self, request: ToolsDescribeInput) -> list[ToolSchema]:
        """The schemas of the run's tools. Registry names never reach a source; the rest ask only the
        sources (and, for MCP, the servers) that serve them, so one down server fails only its runs."""
        python = self._registry.schemas()
        found: dict[str, ToolSchema] = {n: python[n] for n in request.names if n in python}
        offered_by: dict[str, list[str]] = {n: ["python"] for n in found}
        for source in self._sources:
            if not found:
                break
            for name, owner in (await source.owners(list(found))).items():
                offered_by[name].append(owner)
        rest = [n for n in request.names if n not in python]
        for source in self._sources:
            if not rest:
                break
            for schema in await source.describe(rest):
                offered_by.setdefault(schema.name, []).append(schema.source)
                found.setdefault(schema.name, schema)
            rest = [n for n in rest if n not in found]
        tools = [found[n] for n in dict.fromkeys(request.names) if n in found]
        clashes = [
            f"tool {name!r} is offered by {' and '.join(offered_by[name])}; rename or prefix one of them"
            for name in dict.fromkeys(t.name for t in tools)
            if len(offered_by.get(name, ())) > 1
        ]
        clashes += tool_name_collisions(t.name for t in tools)
        if clashes:
            # At the run's start: the names it would send could not be mapped back to one tool each.
            raise to_application_error(ToolConfigError(clashes), clashes)
        return tools

    @activity.defn(name=TOOLS_CALL)
    async def call(self, call: CarryingCallInput) -> ToolCallResult:
        """One tool call; declared ``CarryingCallInput`` so the program a code-mode call carries is decoded."""
        return await self.run(call)

    async def run(self, call: ToolCallInput) -> ToolCallResult:
        """One tool call, for an in-process caller too (``agentsteps tools call``, a replay's live tools)."""
        started = time.perf_counter()
        outcome = "infra_error"
        # The model names the tool: a name no source offers is "other", never a new series.
        label = TOOLS.known(call.name) if self._registry.get(call.name) is None else call.name
        try:
            with tool_span(call.name, call_id=call.call_id, tool_type=self._tool_type(call.name)) as span:
                span.record_arguments(call.arguments)
                result, offered = await self._dispatch(call)
                span.record_result(result.content)
            if offered:
                label = TOOLS.admit(call.name)
            outcome = "error" if result.is_error else "ok"
            result = stored_once(result)  # history keeps the value once
        finally:
            TOOL_CALLS.labels(tool=label, outcome=outcome).inc()
            TOOL_CALL_SECONDS.labels(tool=label).observe(time.perf_counter() - started)
        answered = await self._with_next_call(call, result, started)
        if answered is not None:
            return answered  # the model read the tool message in this activity: nothing to store for it
        result = await self._stored_for_model(call, result)
        return await self._with_program(call, result, started)

    async def _with_program(self, call: ToolCallInput, result: ToolCallResult, started: float) -> ToolCallResult:
        """The result, with the program waiting on it resumed here when it is live on this worker. Never
        fails the call: the tool has answered, and a retry would make it again. Any trouble (not live, no
        time left, the segment failed) leaves the resume to the workflow's ``code.resume``."""
        carried: CarriedProgram | None = getattr(call, "program", None)
        if carried is None or self._programs is None or not _fits(carried.resume.limits.segment_seconds, started):
            return result
        try:
            status = await self._programs(carried, result)
        except Exception:
            activity.logger.warning("the program of call %s is resumed by code.resume instead", call.call_id)
            return result
        return result if status is None else with_pause(result, status)

    async def _with_next_call(
        self, call: ToolCallInput, result: ToolCallResult, started: float
    ) -> CarryingCallResult | None:
        """The result with the model's answer to the next call it carries, made here after the tool; None
        without one. Never fails the call (the tool has answered, and a retry would make it again): any trouble
        (no model here, not enough time left for the model's own timeout, the model call failed or was
        cancelled) leaves that call to the workflow's ``llm.call``, with its own retries."""
        carried: NextModelCall | None = getattr(call, "next_call", None)
        if carried is None:
            return None
        if self._models is None or not _fits(carried.seconds, started):
            NEXT_MODEL_CALLS.labels(outcome="not_made").inc()
            return None
        messages = [*carried.request.messages, tool_message(result, carried.tool_cap)]
        began = time.perf_counter()
        try:
            response = await asyncio.wait_for(
                self._models(carried.request.model_copy(update={"messages": messages})), carried.seconds
            )
        except (Exception, asyncio.CancelledError) as exc:
            # Cancelled too (a worker shutting down): the tool's result is what must not be lost.
            activity.logger.info(
                "the model call after %s goes as its own llm.call: %s", call.call_id, type(exc).__name__
            )
            NEXT_MODEL_CALLS.labels(outcome="failed").inc()
            return None
        NEXT_MODEL_CALLS.labels(outcome="answered").inc()
        return with_next_answer(result, NextModelAnswer(response=response, seconds=time.perf_counter() - began))

    async def _stored_for_model(self, call: ToolCallInput, result: ToolCallResult) -> ToolCallResult:
        """With ``store_for``, the tool message the model reads next, stored bound to the calling run, and
        named in the result: that ``llm.call`` names it instead of carrying the content a second time."""
        owner = caller_owner(call.store_for)
        if not owner or self._conversations is None:
            return result  # the workflow then sends the content itself, as it always did
        message = tool_message(result, call.store_cap)
        if len(message.content or "") < STORED_MESSAGE_MIN_CHARS:
            return result  # cheaper as a copy than as a reference
        ref = await self._conversations.extend(None, [message], [message], owner)
        return result.model_copy(update={"message_ref": ref})

    def _tool_type(self, name: str) -> str:
        # OpenTelemetry's GenAI conventions call server-side tools "extension".
        return "function" if self._registry.get(name) is not None else "extension"

    async def _dispatch(self, call: ToolCallInput) -> tuple[ToolCallResult, bool]:
        """The result, and whether a source offers the tool (an unknown name is the model's mistake)."""
        tool = self._registry.get(call.name)
        if tool is not None:
            return await self._call_python(tool, call), True
        for source in self._sources:
            result = await source.call(call)
            if result is not None:
                return result, True
        return _error(call, f"unknown tool {call.name!r}"), False

    async def _call_python(self, tool: PythonTool, call: ToolCallInput) -> ToolCallResult:
        raw, problem = parse_tool_arguments(call.arguments)
        if problem is not None:
            return _error(call, f"arguments are not usable: {problem}")
        try:
            args = tool.input_model.model_validate(raw)
        except ValidationError as exc:
            return _error(call, f"arguments do not match the schema of {call.name}: {_brief(exc)}")
        try:
            value = await tool.invoke(args, ToolContext(call_id=call.call_id, idempotency_key=call.idempotency_key))
        except ToolError as exc:
            return _error(call, str(exc))
        except Exception as exc:
            if call.delivery != "at_most_once":
                raise  # Temporal retries it: the tool is idempotent or dedupes on its key
            # The tool ran, and nothing says how far: a retry could repeat the effect. Only the
            # exception's type goes to the model: its text may carry what the tool holds (a DSN, a token).
            return outcome_unknown(call, f"the tool raised {type(exc).__name__}")
        structured = _to_jsonable(value)
        if tool.output_model is not None:
            try:
                tool.output_model.model_validate(structured)
            except ValidationError as exc:
                # The tool broke its own contract: the model cannot fix that, but
                # it should know the result is unusable rather than trust it.
                return _error(call, f"tool {call.name} returned output that violates its schema: {_brief(exc)}")
        return ToolCallResult(
            call_id=call.call_id, name=call.name, content=json.dumps(structured, default=str), structured=structured
        )


def _fits(seconds: float, started: float) -> bool:
    """Whether ``seconds`` of work after the tool (a program's segment, a model call), plus a margin, still fit
    in this activity's timeouts: timing out after the tool answered would make the call again."""
    if not activity.in_activity():
        return True
    info = activity.info()
    bounds = [t.total_seconds() for t in (info.start_to_close_timeout, info.heartbeat_timeout) if t]
    needed = time.perf_counter() - started + seconds + SEGMENT_MARGIN_SECONDS
    if info.schedule_to_close_timeout and info.scheduled_time:
        waited = (datetime.now(timezone.utc) - info.scheduled_time).total_seconds() - (time.perf_counter() - started)
        bounds.append(info.schedule_to_close_timeout.total_seconds() - max(0.0, waited))
    return all(needed < bound for bound in bounds)


SEGMENT_MARGIN_SECONDS = 2.0


def _error(call: ToolCallInput, message: str) -> ToolCallResult:
    return ToolCallResult(call_id=call.call_id, name=call.name, content=f"error: {message}", is_error=True)


def _brief(exc: ValidationError) -> str:
    return "; ".join(f"{json_path('$', e['loc'])}: {e['msg']}" for e in exc.errors()[:5])


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value
