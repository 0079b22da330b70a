"""A console on loopback over the test's Temporal client, and the runs it looks at."""

from __future__ import annotations

import asyncio
import re
import uuid
from contextlib import asynccontextmanager
from typing import Any

import httpx
from agent_support import make_spec
from mcp_support import free_port
from temporalio.client import Client
from temporalio.service import RPCError

from agentsteps.console import running_console
from agentsteps.contracts import AgentInput, AgentResult
from agentsteps.contracts.approvals import PendingApproval
from agentsteps.contracts.config.settings import ConsoleSettings
from agentsteps.contracts.names import AGENT_WORKFLOW, APPROVALS_QUERY


@asynccontextmanager
async def console(client: Client, **settings: Any):
    """Yields the console's base URL."""
    config = ConsoleSettings(port=free_port(), **settings)
    async with running_console(client, config) as url:
        yield url


async def start_run(client: Client, task_queue: str, text: str = "refund A-17", **spec: Any):
    return await client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=make_spec(**spec), input=text),
        id=f"console-{uuid.uuid4().hex[:10]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )


async def wait_pending(client: Client, workflow_id: str) -> PendingApproval:
    for _ in range(300):
        try:
            waiting = await client.get_workflow_handle(workflow_id).query(
                APPROVALS_QUERY, result_type=list[PendingApproval]
            )
        except RPCError:
            waiting = []
        if waiting:
            return waiting[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no call started waiting for approval")


async def until(check, timeout: float = 15.0, interval: float = 0.2):
    """Visibility is eventually consistent: ask again until ``check()`` returns something true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await check()
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(interval)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the page has no CSRF field"
    return found.group(1)


def browser(url: str) -> httpx.AsyncClient:
    """A client that keeps cookies, as a browser does, and never follows redirects by itself."""
    return httpx.AsyncClient(base_url=url, timeout=20)


def program_reply(code: str) -> dict[str, Any]:
    """A scripted model answer holding a code-mode program."""
    return {"content": f"Here is the program.\n```python\n{code}```\n"}


def code_spec(**overrides: Any):
    """A code-mode spec on the code-mode test worker's tools (``code_mode_support``)."""
    return make_spec(
        **{
            "name": "code-test",
            "mode": "code",
            "max_steps": 4,
            "reprompt_budget": 1,
            "tools": ["tickets.list", "tickets.nudge", "wait"],
            **overrides,
        }
    )
