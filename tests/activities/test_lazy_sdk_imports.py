"""The provider SDKs are imported only by the provider that uses them (``providers/registry.py``).

``anthropic`` costs a worker ~1 s of CPU to import and ``openai`` ~0.4 s: a worker process and the CLI
load neither at start, an OpenAI-compatible run never loads ``anthropic`` (its calls, streams and
mapped errors included), and the first Claude call loads it. Each case runs in a fresh interpreter (the
test process has imported both SDKs), against the scripted model server, so none is marked fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

START = """
import json, sys
import agentsteps.worker
import agentsteps.cli
print(json.dumps({sdk: sdk in sys.modules for sdk in ("anthropic", "openai")}))
"""

RUN = """
import asyncio, json, sys

from pydantic import SecretStr
from temporalio.testing import ActivityEnvironment

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.contracts import LLMConfig, LLMRequest, Message
from agentsteps.contracts.config.settings import ProviderSettings
from agentsteps.contracts.errors import RetryableProviderError
from agentsteps.scripted_model import ScriptedModelServer

seen = {}
import_threads = {}


class WhereImported:
    # Notes the thread each SDK is first imported in, and finds nothing itself.

    def find_spec(self, name, path=None, target=None):
        if name in ("anthropic", "openai"):
            import threading

            import_threads.setdefault(name, threading.current_thread() is threading.main_thread())
        return None


sys.meta_path.insert(0, WhereImported())


def note(step):
    seen[step] = {sdk: sdk in sys.modules for sdk in ("anthropic", "openai")}


def request(provider, model):
    return LLMRequest(config=LLMConfig(provider=provider, model=model), messages=[Message.user("hi")])


async def main(server):
    settings = ProviderSettings(
        openai_base_url=server.url_openai,
        anthropic_base_url=server.url_anthropic,
        openai_api_key=SecretStr("sk-test-lazy"),
        anthropic_api_key=SecretStr("sk-test-lazy"),
        request_timeout_seconds=5.0,
    )
    async with provider_http_client(5.0) as http:
        activities = LLMActivities(settings, http)
        note("built")
        server.set_script({"default": {"content": "ok"}})
        answer = await ActivityEnvironment().run(activities.call, request("openai", "gpt-4o-2024-08-06"))
        assert answer.message.content == "ok", answer
        openai = activities._providers.get("openai")
        streamed = []
        answer = await openai.stream(request("openai", "gpt-4o-2024-08-06"), streamed.append)
        assert answer.message.content == "ok" and streamed, (answer, streamed)
        server.set_script({"default": {"fault": {"status": 429, "retry_after": "3", "message": "slow down"}}})
        for call in (openai.complete(request("openai", "gpt-4o-2024-08-06")),
                     openai.stream(request("openai", "gpt-4o-2024-08-06"), streamed.append)):
            try:
                await call
            except RetryableProviderError as exc:
                assert exc.status == 429 and exc.retry_after == 3.0, exc
            else:
                raise AssertionError("a 429 passed")
        note("openai")
        server.set_script({"default": {"content": "ok"}})
        answer = await ActivityEnvironment().run(activities.call, request("anthropic", "claude-sonnet-4-20250514"))
        assert answer.message.content == "ok", answer
        note("anthropic")
        seen["imported_on_the_event_loop"] = import_threads


with ScriptedModelServer() as server:
    asyncio.run(main(server))
print(json.dumps(seen))
"""


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_worker_and_the_cli_import_no_provider_sdk_at_start():
    assert _run(START) == {"anthropic": False, "openai": False}


def test_an_openai_run_never_imports_anthropic_and_the_first_claude_call_does():
    seen = _run(RUN)
    assert seen["built"] == {"anthropic": False, "openai": False}
    # Calls, a stream and the errors of both mapped (errors.py, streams.py), all without the other SDK.
    assert seen["openai"] == {"anthropic": False, "openai": True}
    assert seen["anthropic"] == {"anthropic": True, "openai": True}
    # Each SDK was imported in a thread, never on the event loop every activity and poller shares.
    assert seen["imported_on_the_event_loop"] == {"anthropic": False, "openai": False}
