"""The provider SDKs are imported only by the provider that uses them (``providers/registry.py``), and
the MCP SDK only by a worker that names an MCP server (``activities/mcp/sdk.py``).

``anthropic`` costs a worker ~1 s of CPU to import, ``openai`` ~0.4 s and ``mcp`` ~0.6 s: a worker
process and the CLI load none of them at start, an OpenAI-compatible run never loads ``anthropic`` (its
calls, streams and mapped errors included), the first Claude call loads it, and a worker's MCP fleet
with no server (describe, readiness, report) never loads ``mcp`` while one with a server loads it on
connecting. Each case runs in a fresh interpreter (the test process has imported every SDK), against
the scripted model server or the bundled tracker, so none is marked fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

from mcp_support import new_token, seeded_db, stdio_tracker, write_mcp_config

START = """
import json, sys
import agentsteps.worker
import agentsteps.cli
print(json.dumps({sdk: sdk in sys.modules for sdk in ("anthropic", "openai", "mcp", "mcp_types")}))
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


MCP_FLEET = """
import asyncio, json, sys, threading

from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.worker import build_mcp

import_threads = {}


class WhereImported:
    def find_spec(self, name, path=None, target=None):
        if name in ("mcp", "mcp_types"):
            import_threads.setdefault(name, threading.current_thread() is threading.main_thread())
        return None


sys.meta_path.insert(0, WhereImported())
seen = {}


def note(step):
    seen[step] = {sdk: sdk in sys.modules for sdk in ("mcp", "mcp_types")}


async def fleet(config_file):
    # What a worker builds (worker.build_mcp), starts and asks: tools.describe, /readyz, `tools list`.
    mcp = build_mcp(WorkerSettings(config_file=config_file))
    mcp.start()
    try:
        tools = sorted(tool.name for tool in await mcp.source().describe())
        return {"tools": tools, "ready": mcp.fleet.ready(), "servers": sorted(mcp.fleet.report())}
    finally:
        await mcp.aclose()


without = asyncio.run(fleet(None))
note("without_servers")
configured = asyncio.run(fleet(sys.argv[1]))
note("with_a_server")
print(json.dumps({"seen": seen, "without": without, "with": configured, "imported_on_the_event_loop": import_threads}))
"""


def _run(code: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_worker_and_the_cli_import_no_provider_sdk_and_no_mcp_sdk_at_start():
    assert _run(START) == {"anthropic": False, "openai": False, "mcp": False, "mcp_types": False}


def test_a_worker_without_mcp_servers_never_imports_the_mcp_sdk_and_one_with_a_server_does_off_the_loop(tmp_path):
    config = write_mcp_config(tmp_path / "agentsteps.toml", {"tracker": stdio_tracker(seeded_db(tmp_path))})
    token = new_token()
    seen = _run(MCP_FLEET, str(config), env={"TICKETS_API_TOKEN": token, "TRACKER_EXPECTS": token})
    assert seen["without"] == {"tools": [], "ready": True, "servers": []}
    assert seen["seen"]["without_servers"] == {"mcp": False, "mcp_types": False}
    # The same calls with a server connect to it, which loads the SDK in a thread (activities/mcp/sdk.py).
    assert {"list_issues", "get_issue"} <= set(seen["with"]["tools"]), seen["with"]
    assert seen["with"]["servers"] == ["tracker"]
    assert seen["seen"]["with_a_server"] == {"mcp": True, "mcp_types": True}
    assert seen["imported_on_the_event_loop"] == {"mcp": False, "mcp_types": False}


def test_an_openai_run_never_imports_anthropic_and_the_first_claude_call_does():
    seen = _run(RUN)
    assert seen["built"] == {"anthropic": False, "openai": False}
    # Calls, a stream and the errors of both mapped (errors.py, streams.py), all without the other SDK.
    assert seen["openai"] == {"anthropic": False, "openai": True}
    assert seen["anthropic"] == {"anthropic": True, "openai": True}
    # Each SDK was imported in a thread, never on the event loop every activity and poller shares.
    assert seen["imported_on_the_event_loop"] == {"anthropic": False, "openai": False}
