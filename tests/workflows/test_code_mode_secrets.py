"""A code-mode program uses a tool whose credential only the worker holds.

The tool authorises to a loopback HTTP service with a token read from the
worker's environment when its registry is built. The program gets the
service's answer, never the token: it is absent from workflow history, from
every prompt the model server received, from the generated stubs, from the
stored snapshots of the paused program, and from the worker log. The program's
own attempt to read the environment is refused.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from pydantic import BaseModel
from secret_scan import SecretScan

from agentsteps.activities.sandbox import activities as sandbox_activities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.code.stubs import generate_stubs
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.worker import running_worker

SECRET_ENV = "CRM_API_TOKEN"
SECRET = "crm-" + uuid.uuid4().hex
PLANS = {"acme": "enterprise", "globex": "starter"}


class Lookup(BaseModel):
    customer: str


class Account(BaseModel):
    customer: str
    plan: str


@pytest.fixture
def crm() -> Iterator[dict]:
    """A loopback service that answers only requests carrying the token."""
    seen: dict = {"authorised": 0, "refused": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            customer = self.path.rsplit("/", 1)[-1]
            ok = self.headers.get("Authorization") == f"Bearer {SECRET}"
            seen["authorised" if ok else "refused"] += 1
            body = json.dumps({"customer": customer, "plan": PLANS.get(customer, "none")}).encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen["url"] = f"http://127.0.0.1:{server.server_address[1]}"
    yield seen
    server.shutdown()
    server.server_close()


def crm_registry(base_url: str) -> ToolRegistry:
    # Read when the worker builds its tools, never at import and never per call
    # from anything the workflow sends.
    token = os.environ[SECRET_ENV]
    registry = ToolRegistry()

    @registry.tool(name="crm.lookup")
    async def lookup(args: Lookup) -> Account:
        """Look up a customer's account in the CRM."""
        async with httpx.AsyncClient(base_url=base_url, timeout=5) as http:
            reply = await http.get(f"/accounts/{args.customer}", headers={"Authorization": f"Bearer {token}"})
        reply.raise_for_status()
        return Account.model_validate(reply.json())

    return registry


PROGRAM = """\
import asyncio
import os
try:
    leaked = os.getenv("CRM_API_TOKEN")
except Exception as exc:
    leaked = "refused: " + str(exc)
accounts = await asyncio.gather(crm_lookup("acme"), crm_lookup("globex"))
{"leaked": leaked, "plans": [a["plan"] for a in accounts]}
"""


async def test_tool_secret_stays_in_the_worker_in_code_mode(client, settings, scripted, crm, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(SECRET_ENV, SECRET)
    # Kept live, a program stores a snapshot only before a long wait or past the replay bound: store one at
    # every pause here, so the scan reads the interpreter's memory too.
    monkeypatch.setattr(sandbox_activities, "REPLAY_CALLS_BOUND", 0)
    registry = crm_registry(crm["url"])
    scripted.set_script({"replies": [{"content": f"```python\n{PROGRAM}```\n"}]})
    spec = AgentSpec(
        name="crm-code",
        model=LLMConfig(model="scripted-2026-01-01", max_tokens=512, context_window=64_000),
        tools=["crm.lookup"],
        mode="code",
        max_steps=2,
        reprompt_budget=0,
    )
    async with running_worker(client, settings, registry=registry):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="which plans are acme and globex on?"),
            id=f"crm-{uuid.uuid4().hex[:8]}",
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        result = await handle.result()
        history = await handle.fetch_history()

    # The secret was really used: the service answered only authorised calls.
    assert result.status == "completed"
    assert result.output["plans"] == ["enterprise", "starter"]
    assert result.output["leaked"].startswith("refused: os.getenv")
    assert crm["authorised"] == 2 and crm["refused"] == 0

    assert scripted.requests and caplog.records
    # The program paused on its calls, and a snapshot of its memory was stored (beside the conversation segments).
    assert [p for p in (settings.state_dir / "payloads").rglob("*") if p.is_file() and b'"prev":' not in p.read_bytes()]
    scan = SecretScan(SECRET).history(history).requests(scripted.requests).text("worker logs", caplog.text)
    scan.text("model request headers", json.dumps([dict(r.headers) for r in scripted.requests]))
    scan.text("stubs", generate_stubs(list(registry.schemas().values())))
    scan.files("payload store", settings.state_dir / "payloads").metrics().assert_clean()
