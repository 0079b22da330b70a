"""The offline banner is true: with no API key, an Anthropic spec is answered by the offline scripted model
too (it failed on a missing ANTHROPIC_API_KEY while the banner said every model call went to the script)."""

from __future__ import annotations

import uuid

from agentsteps.cli.offline import worker_models
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker


async def test_an_anthropic_spec_is_answered_by_the_offline_model_the_banner_names(client, settings):
    keyless = settings.model_copy(update={"providers": ProviderSettings()})
    spec = AgentSpec(name="offline", model=LLMConfig(provider="anthropic", model="claude-3-5-haiku-20241022"), tools=[])
    with worker_models(keyless) as models:
        async with running_worker(client, models.settings):
            result = await client.execute_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=spec, input="Tell me a joke"),
                id=f"offline-anthropic-{uuid.uuid4().hex[:8]}",
                task_queue=settings.task_queue,
                result_type=AgentResult,
            )

    assert "every model call is answered by the offline scripted model" in models.note
    assert result.status == "completed" and "offline scripted model" in result.output
