"""``agentsteps demo``: one agent run on the embedded stack, explained as it goes.

With OPENAI_API_KEY or ANTHROPIC_API_KEY the demo uses that provider; without
one it starts the offline scripted model (a test double) and says so.
"""

from __future__ import annotations

import sys
import uuid
from contextlib import AsyncExitStack
from importlib import resources

from ..client.dev_server import embedded_temporal
from ..client.report import print_progress, print_result
from ..client.runs import follow, start_agent_run
from ..client.spec_files import parse_spec
from ..contracts import AgentSpec, LLMConfig
from ..contracts.config.settings import WorkerSettings
from ..scripted_model import Script, ScriptedModelServer
from ..telemetry.server import start_metrics_server
from ..worker import connect, load_registry, running_worker
from .code_mode import demo_code_mode_run
from .monitor import demo_monitor_tick


def private_queue(base: str, part: str) -> str:
    """A task queue only this process polls (see cli/workers.py for why the demo never shares one)."""
    return f"{base}-{part}-{uuid.uuid4().hex[:8]}"


DEMO_INPUT = "What is the weather in Paris and in Tokyo? Notify alice@example.com with a one-line summary."
OPENAI_DEMO_MODEL = "gpt-4o-mini-2024-07-18"
ANTHROPIC_DEMO_MODEL = "claude-3-5-haiku-20241022"


def demo_spec(settings: WorkerSettings) -> AgentSpec:
    import tomllib

    data = tomllib.loads(resources.files("agentsteps.examples").joinpath("demo_agent.toml").read_text())
    spec = parse_spec(data)
    model = spec.model
    if settings.providers.openai_api_key:
        model = LLMConfig(**{**model.model_dump(), "model": OPENAI_DEMO_MODEL, "context_window": 128_000})
    elif settings.providers.anthropic_api_key:
        model = LLMConfig(
            **{**model.model_dump(), "provider": "anthropic", "model": ANTHROPIC_DEMO_MODEL, "context_window": 200_000}
        )
    return spec.model_copy(update={"model": model})


async def run_demo(settings: WorkerSettings) -> int:
    out = sys.stdout
    async with AsyncExitStack() as stack:
        if settings.providers.openai_api_key or settings.providers.anthropic_api_key:
            provider = "OpenAI-compatible" if settings.providers.openai_api_key else "Anthropic"
            print(f"Using the real {provider} model from your environment.", file=out)
        else:
            script = Script.model_validate_json(
                resources.files("agentsteps.examples").joinpath("demo_script.json").read_text()
            )
            scripted = stack.enter_context(ScriptedModelServer(script))
            settings = settings.model_copy(
                update={"providers": settings.providers.model_copy(update={"openai_base_url": scripted.url_openai})}
            )
            print(
                "No OPENAI_API_KEY or ANTHROPIC_API_KEY set: using the offline scripted model "
                f"(a test double) at {scripted.url_openai}.",
                file=out,
            )
        print("Starting the embedded Temporal server (state in .agentsteps/) ...", file=out, flush=True)
        temporal = await stack.enter_async_context(embedded_temporal(settings))
        if not temporal.started_here:
            print(temporal.describe(), file=out, flush=True)
        client = await connect(settings, temporal.address)
        metrics = start_metrics_server(0, host="127.0.0.1")
        stack.callback(metrics.stop)
        registry = load_registry(settings)
        # The demo's workers poll task queues of their own: another worker on the shared queue (agentsteps dev)
        # has its own models and tools, and must never take the demo's calls.
        settings = settings.model_copy(update={"task_queue": private_queue(settings.task_queue, "demo")})
        await stack.enter_async_context(running_worker(client, settings, registry=registry))

        spec = demo_spec(settings)
        print(f"\nAgent {spec.name!r} on {spec.model.provider}/{spec.model.model}", file=out)
        print(f"Input: {DEMO_INPUT}", file=out, flush=True)
        handle = await start_agent_run(
            client, spec, DEMO_INPUT, task_queue=settings.task_queue, known_tools=registry.schemas()
        )
        result = await follow(handle, lambda s: print_progress(s, out))
        print(file=out)
        print_result(result, out)
        code_result = await demo_code_mode_run(client, settings, out)
        report = await demo_monitor_tick(client, settings, out=out)
        print("\nWhere to look:", file=out)
        if temporal.ui_url:
            print(f"  Temporal UI: {temporal.ui_url}/namespaces/{settings.namespace}/workflows/{handle.id}", file=out)
        print(f"  Metrics:     {metrics.url}/metrics (while the demo runs; `agentsteps dev` serves :9464)", file=out)
        if temporal.started_here:
            print(
                "  These links die with the demo's server when it exits. To keep them alive, start\n"
                "  `agentsteps dev` in another terminal (. .venv/bin/activate first), then run `make demo`\n"
                "  again: it uses dev's server, and its runs stay browsable there.",
                file=out,
            )
        elif not temporal.cluster:
            print("  These links stay alive while the server it found (`agentsteps dev`) runs.", file=out)
        print("\nDemo finished; shutting down cleanly.", file=out, flush=True)
    succeeded = result.status.startswith("completed") and code_result.status == "completed" and not report.failed
    return 0 if succeeded else 1
