"""API keys stay in the worker: not in history, not in prompts, not in logs."""

from __future__ import annotations

import logging
import uuid

from pydantic import SecretStr

from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker

from agent_support import make_spec, weather_then_answer

SECRET = "sk-test-" + uuid.uuid4().hex


async def test_api_key_never_reaches_history_prompts_or_logs(client, settings, scripted, caplog):
    caplog.set_level(logging.DEBUG)
    script = weather_then_answer()
    script["api_key"] = SECRET
    scripted.set_script(script)
    keyed = settings.model_copy(
        update={"providers": settings.providers.model_copy(update={"openai_api_key": SecretStr(SECRET)})}
    )
    async with running_worker(client, keyed):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=make_spec(), input="weather in Paris and Tokyo"),
            id=f"secret-{uuid.uuid4().hex[:8]}",
            task_queue=keyed.task_queue,
            result_type=AgentResult,
        )
        result = await handle.result()
        history = await handle.fetch_history()

    assert result.status == "completed"
    # The key was really used: the server accepts nothing without it.
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in scripted.requests)
    assert SECRET not in history.to_json()
    assert all(SECRET not in str(r.body) for r in scripted.requests)
    assert SECRET not in caplog.text
    assert SECRET not in repr(keyed)
