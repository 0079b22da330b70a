"""A code-mode run for ``agentsteps demo``: the model writes one program.

The same weather task as the demo's tool-calling run, in ``mode = "code"``:
the program looks three cities up concurrently, picks the warmest in a
variable, sends one notification and returns a small JSON answer. Offline the
scripted model (a test double) answers with a correct program; with an API key
the real model writes its own. The run uses its own worker on its own task
queue, so it never disturbs the demo's worker or its model server.
"""

from __future__ import annotations

import json
import sys
import uuid
from contextlib import AsyncExitStack
from typing import TextIO

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from ..client.report import print_progress
from ..client.runs import follow, start_agent_run
from ..contracts import AgentResult, AgentSpec, LLMConfig, LLMResponse
from ..contracts.code.stubs import extract_program
from ..contracts.config.settings import WorkerSettings
from ..contracts.names import LLM_CALL_PLAN_FIRST, MODEL_CALLS
from ..contracts.quotas.plan import PlanFirstAnswer
from ..scripted_model import ScriptedModelServer
from ..worker import load_registry, running_worker

CODE_DEMO_INPUT = (
    "Which of Paris, Tokyo and London is warmest right now? Notify alice@example.com with a one-line summary."
)
SCRIPTED_MODEL = "scripted-demo-2026-01-01"
OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
ANTHROPIC_MODEL = "claude-3-5-haiku-20241022"

DEMO_PROGRAM = """\
import asyncio
cities = ["Paris", "Tokyo", "London"]
reports = await asyncio.gather(*[get_weather(city) for city in cities])
warmest = max(reports, key=lambda w: w["temperature_c"])
summary = "; ".join(w["city"] + " " + str(w["temperature_c"]) + " C, " + w["conditions"] for w in reports)
await send_notification("alice@example.com", "Warmest: " + warmest["city"] + ". " + summary)
{"summary": summary, "warmest_city": warmest["city"]}
"""

OUTPUT_SCHEMA = {
    "type": "object",
    "required": ["summary", "warmest_city"],
    "additionalProperties": False,
    "properties": {"summary": {"type": "string", "minLength": 1}, "warmest_city": {"type": "string"}},
}


def code_demo_spec(settings: WorkerSettings) -> AgentSpec:
    if settings.providers.openai_api_key:
        model = LLMConfig(model=OPENAI_MODEL, max_tokens=800, context_window=128_000)
    elif settings.providers.anthropic_api_key:
        model = LLMConfig(provider="anthropic", model=ANTHROPIC_MODEL, max_tokens=800, context_window=200_000)
    else:
        model = LLMConfig(model=SCRIPTED_MODEL, max_tokens=800, context_window=32_000)
    return AgentSpec(
        name="weather-notifier-code",
        system_prompt='You are an operations assistant. Return JSON: {"summary": "...", "warmest_city": "..."}.',
        model=model,
        tools=["get_weather", "send_notification"],
        mode="code",
        output_schema=OUTPUT_SCHEMA,
        max_steps=4,
        reprompt_budget=2,
        token_budget=50_000,
    )


async def demo_code_mode_run(client: Client, settings: WorkerSettings, out: TextIO | None = None) -> AgentResult:
    """Run the code-mode demo on its own worker; print the program, its tool calls and its result."""
    out = out or sys.stdout
    print("\nCode mode: the model writes one program; each tool call in it is its own activity.", file=out)
    async with AsyncExitStack() as stack:
        if not (settings.providers.openai_api_key or settings.providers.anthropic_api_key):
            scripted = stack.enter_context(
                ScriptedModelServer({"default": {"content": f"```python\n{DEMO_PROGRAM}```"}})
            )
            settings = settings.model_copy(
                update={"providers": settings.providers.model_copy(update={"openai_base_url": scripted.url_openai})}
            )
        task_queue = f"{settings.task_queue}-code-demo-{uuid.uuid4().hex[:8]}"
        registry = load_registry(settings)
        await stack.enter_async_context(running_worker(client, settings, registry=registry, task_queue=task_queue))
        spec = code_demo_spec(settings)
        print(f'Agent {spec.name!r} on {spec.model.provider}/{spec.model.model}, mode = "code"', file=out)
        print(f"Input: {CODE_DEMO_INPUT}", file=out, flush=True)
        handle = await start_agent_run(
            client,
            spec,
            CODE_DEMO_INPUT,
            task_queue=task_queue,
            known_tools=registry.schemas(),
            workflow_id=f"code-demo-{uuid.uuid4().hex[:10]}",
        )
        result = await follow(handle, lambda s: print_progress(s, out))
        programs = await programs_written(client, handle)
    print_code_run(result, programs[-1] if programs else None, out)
    return result


async def programs_written(client: Client, handle: WorkflowHandle[object, AgentResult]) -> list[str]:
    """The programs the model wrote, read back from the run's history (model replies)."""
    scheduled: dict[int, str] = {}
    programs: list[str] = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name in MODEL_CALLS:
                scheduled[event.event_id] = name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            name = scheduled.get(attrs.scheduled_event_id, "")
            if name == LLM_CALL_PLAN_FIRST:  # the run's first call: the reply, or the worker's quota plan
                [first] = await client.data_converter.decode(attrs.result.payloads, [PlanFirstAnswer])
                response = first.response
            elif name:
                [response] = await client.data_converter.decode(attrs.result.payloads, [LLMResponse])
            else:
                continue
            if response is not None:
                program = extract_program(response.message.content)
                if program:
                    programs.append(program)
    return programs


def print_code_run(result: AgentResult, program: str | None, out: TextIO) -> None:
    if program:
        print("The program it ran:", file=out)
        print("\n".join(f"    {line}" for line in program.rstrip().splitlines()), file=out)
    calls = result.steps[-1].tool_calls if result.steps else []
    print(f"Tool calls the program made ({len(calls)}, each its own activity):", file=out)
    for call in calls:
        print(f"  {call.name}({call.arguments}) -> {call.content}", file=out)
    print(
        f"status: {result.status}; {result.usage.total_tokens} model tokens. The tool results stayed in the "
        f"program; the run's answer is the program's value:",
        file=out,
    )
    print(f"  {json.dumps(result.output)}", file=out, flush=True)


__all__ = ["CODE_DEMO_INPUT", "DEMO_PROGRAM", "code_demo_spec", "demo_code_mode_run", "print_code_run"]
