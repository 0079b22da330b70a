"""Record real workflow histories into tests/histories/ for the replay suite.

Each history is one real run on a real dev server, through the real worker
(scripted model over HTTP, real tools, real Monty, the bundled tracker over
MCP stdio), written with ``history.to_json()``. ``test_replay_histories.py``
replays every file against the current build, so a change to the commands a
workflow issues fails CI unless it is gated with ``workflow.patched``.

Two of them are taken while the run is still open (a code-mode program paused
on a slow tool, a tool-mode run waiting on one): the shape a worker upgrade
meets in flight. The runs then finish, and the recorder checks that they did.

Record once per release, before changing workflow code, and never re-record a
file to make the replay test pass: a new file sits beside the old ones
(``docs/upgrades.md``).

    .venv/bin/python tests/support/record_histories.py [--out tests/histories] [--prefix ""]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import tomllib
import uuid
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.client.forks import fork_run
from agentsteps.client.pipeline_files import load_pipeline_file
from agentsteps.client.session_forks import fork_session
from agentsteps.client.sessions import (
    close_session,
    continue_session,
    decide_approval,
    pending_approvals,
    send_turn,
    session_state,
)
from agentsteps.client.spec_files import parse_spec
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.composition.pipeline_run import PipelineResult, pipeline_input
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.errors import RunNotFoundError
from agentsteps.contracts.monitor import MonitorInput, MonitorReport
from agentsteps.contracts.names import AGENT_WORKFLOW, MONITOR_WORKFLOW, PIPELINE_WORKFLOW, TOOLS_CALL
from agentsteps.contracts.session import SessionConfig
from agentsteps.demos.agent_run import DEMO_INPUT
from agentsteps.demos.code_mode import DEMO_PROGRAM, code_demo_spec
from agentsteps.demos.monitor import assigned_issues, monitor_worker, nudge_script, tracker_client, tracker_server
from agentsteps.examples import demo_tools, support_tools
from agentsteps.scripted_model import ScriptedModelServer
from agentsteps.worker import connect, running_worker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from approval_support import approval_registry  # noqa: E402
from monitor_support import make_spec as monitor_spec  # noqa: E402
from monitor_support import seed_tracker  # noqa: E402

MODEL = "scripted-2026-01-01"
SLOW_TOOL_SECONDS = 3.0
PIPELINE_FILE = HERE.parents[1] / "examples" / "pipelines" / "support_reply.toml"
FAILING_PROGRAM = 'await send_notification(recipient="kim", message="hello")\nraise ValueError("oops")\n'
WORKING_PROGRAM = (
    'd = await send_notification(recipient="kim", message="hello")\n'
    'w = await llm("say hi")\n{"id": d["notification_id"], "w": w}\n'
)


class Pause(BaseModel):
    seconds: float


class Waited(BaseModel):
    seconds: float


def recorder_registry(settings: WorkerSettings) -> ToolRegistry:
    """The demo tools, the pipeline's ticket tool, a refund that needs approval, and a slow tool to be caught
    waiting on."""
    registry = demo_tools.build_registry(settings)
    for tool in [*support_tools.build_registry(settings), *approval_registry([])]:
        registry.add(tool)

    @registry.tool(name="wait")
    async def wait(args: Pause) -> Waited:
        """Sleep for the given seconds, then answer."""
        await asyncio.sleep(args.seconds)
        return Waited(seconds=args.seconds)

    @registry.tool(name="audit")
    def audit(args: Pause) -> Waited:
        """An audit whose back end refuses every call: it fails the turn that makes it."""
        raise ApplicationError("the audit service refused the call", type="AuditDown", non_retryable=True)

    return registry


def agent_spec(**overrides: Any) -> AgentSpec:
    data: dict[str, Any] = {
        "name": "recorded",
        "model": LLMConfig(model=MODEL, max_tokens=256, context_window=16_000),
        "tools": ["wait"],
        "max_steps": 4,
    }
    data.update(overrides)
    return AgentSpec(**data)


class Recorder:
    def __init__(self, client: Client, task_queue: str, scripted: ScriptedModelServer, out: Path, prefix: str):
        self.client = client
        self.task_queue = task_queue
        self.scripted = scripted
        self.out = out
        self.prefix = prefix
        self.written: list[str] = []

    async def save(self, name: str, handle: WorkflowHandle) -> None:
        history = await handle.fetch_history()
        text = history.to_json()
        if "externalPayloads" in text:
            raise SystemExit(f"{name}: a payload went to the external store; record a smaller run")
        path = self.out / f"{self.prefix}{name}.json"
        path.write_text(json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n")
        self.written.append(f"{path.name}: {len(history.events)} events")
        print(f"recorded {path} ({len(history.events)} events)", file=sys.stderr)

    async def agent(
        self, name: str, spec: AgentSpec, text: str, script: dict, *, task_queue: str | None = None
    ) -> None:
        self.scripted.set_script(script)
        handle = await self.client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input=text),
            id=f"{name}-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue or self.task_queue,
            result_type=AgentResult,
        )
        result = await handle.result()
        assert result.status == "completed", (name, result.status)
        await self.save(name, handle)

    async def agent_caught_waiting(self, name: str, spec: AgentSpec, script: dict) -> None:
        """Save the history while a tool call is in flight, then see the run finish."""
        self.scripted.set_script(script)
        handle = await self.client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=spec, input="wait, then answer"),
            id=f"{name}-{uuid.uuid4().hex[:8]}",
            task_queue=self.task_queue,
            result_type=AgentResult,
        )
        await _until(lambda: _tool_call_pending(handle), timeout=SLOW_TOOL_SECONDS * 3)
        await self.save(name, handle)
        result = await handle.result()
        assert result.status == "completed", (name, result.status)


async def _tool_call_pending(handle: WorkflowHandle) -> bool:
    desc = await handle.describe()
    return any(a.activity_type.name == TOOLS_CALL for a in desc.raw_description.pending_activities)


async def _until(check: Callable[[], Awaitable[bool]], timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("the run never reached the state to record")
        await asyncio.sleep(0.05)


async def _tool_mode(rec: Recorder) -> None:
    """The demo's run: concurrent lookups, a re-prompted bad call, a side effect, a JSON answer."""
    examples = resources.files("agentsteps.examples")
    spec = parse_spec(tomllib.loads(examples.joinpath("demo_agent.toml").read_text()))
    script = json.loads(examples.joinpath("demo_script.json").read_text())
    await rec.agent("tool_mode", spec, DEMO_INPUT, script)


async def record(out: Path, prefix: str, only: set[str] | None = None) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
        dev_server_log_level="error",
    )
    try:
        with tempfile.TemporaryDirectory() as state, ScriptedModelServer({"rules": []}) as scripted:
            settings = WorkerSettings(
                state_dir=Path(state),
                task_queue=f"record-{uuid.uuid4().hex[:6]}",
                snapshot_key="recorder-snapshot-key-0123456789abcdef",
                providers=ProviderSettings(openai_base_url=scripted.url_openai, request_timeout_seconds=10),
            )
            client = await connect(settings, env.client.service_client.config.target_host)
            rec = Recorder(client, settings.task_queue, scripted, out, prefix)
            async with running_worker(client, settings, registry=recorder_registry(settings)):
                if only is None or "session" in only:
                    await _session(rec)
                if only is None or "session_streaming" in only:
                    await _session_streaming(rec)
                if only is None or "session_state" in only:
                    await _session_state(rec)
                if only is None:
                    await _agents(rec, settings)
                elif "tool_mode" in only:
                    await _tool_mode(rec)
                if only is None or "quotas" in only:
                    await _quotas(rec, settings)
                if only is None or "code_mode_fork" in only:
                    await _code_mode_fork(rec)
                if only is None or "session_fork" in only:
                    await _session_fork(rec)
            if only is None:
                await _monitor_tick(rec, settings, Path(state))
    finally:
        await env.shutdown()
    return rec.written


async def _agents(rec: Recorder, settings: WorkerSettings) -> None:
    await _tool_mode(rec)
    await rec.agent(
        "code_mode",
        code_demo_spec(settings),
        "Which city is warmest?",
        {"default": {"content": f"```python\n{DEMO_PROGRAM}```"}},
    )
    await _pipeline(rec)
    # A program that fails, is re-prompted, then calls a tool and the LLM from inside the sandbox.
    await rec.agent(
        "agent_code_mode",
        agent_spec(mode="code", tools=["send_notification"]),
        "notify kim",
        {
            "replies": [
                {"content": f"```python\n{FAILING_PROGRAM}```"},
                {"content": f"```python\n{WORKING_PROGRAM}```"},
                {"content": "hi"},
            ]
        },
    )
    await rec.agent_caught_waiting(
        "code_mode_paused_on_tool",
        agent_spec(mode="code"),
        {"default": {"content": f"```python\nw = await wait({SLOW_TOOL_SECONDS})\n{{'waited': w['seconds']}}\n```"}},
    )
    await rec.agent_caught_waiting(
        "tool_mode_waiting_on_tool",
        agent_spec(),
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "wait", "arguments": {"seconds": SLOW_TOOL_SECONDS}}]},
                },
                {"match": {"tool_result_for": "wait"}, "reply": {"content": "done waiting"}},
            ]
        },
    )


async def _quotas(rec: Recorder, settings: WorkerSettings) -> None:
    """A tool-mode run under a quota and its tenant's budget, and the quota's account once it granted."""
    from agentsteps.client.quotas import ensure_accounts
    from agentsteps.contracts.quotas.config import QuotaSettings

    quotas = QuotaSettings.model_validate(
        {
            "limits": [
                {
                    "name": f"rec-{uuid.uuid4().hex[:6]}",
                    "model": "scripted-*",
                    "requests_per_minute": 100,
                    "input_tokens_per_minute": 100_000,
                    "concurrent_requests": 4,
                }
            ],
            "tenants": [
                {"name": f"acme-{uuid.uuid4().hex[:6]}", "weight": 2, "budget": {"day": {"tokens_hard": 1_000_000}}}
            ],
        }
    )
    # The worker's own table decides a run's quotas (QUOTA_FROM_WORKER_PATCH): the run goes to a worker that has
    # it, on a queue of its own; that worker also keeps the accounts.
    queue = f"{rec.task_queue}-quotas"
    quoted = settings.model_copy(update={"quotas": quotas, "task_queue": queue})
    async with running_worker(rec.client, quoted, registry=recorder_registry(settings)):
        await ensure_accounts(rec.client, quotas, queue)
        await _quota_run(rec, quotas, queue)


async def _quota_run(rec: Recorder, quotas: Any, queue: str) -> None:
    tenant = quotas.tenants[0].name
    rec.scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                },
                {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "Paris: light rain"}},
            ]
        }
    )
    handle = await rec.client.start_workflow(
        AGENT_WORKFLOW,
        AgentInput(
            spec=agent_spec(tools=["get_weather"]),
            input="weather in Paris?",
            tenant=tenant,  # the recording worker's config decides the plan (QUOTA_FROM_WORKER_PATCH)
        ),
        id=f"quota-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        result_type=AgentResult,
    )
    assert (await handle.result()).status == "completed"
    await rec.save("quota_tool_mode", handle)
    await asyncio.sleep(1)  # the releases reach the account
    await rec.save("quota_account", rec.client.get_workflow_handle(f"agentsteps-quota-{quotas.limits[0].name}"))


async def _code_mode_fork(rec: Recorder) -> None:
    """A code-mode fork inside its source's program (``code.fork``), caught waiting on its next tool call."""
    program = (
        'd = await send_notification(recipient="kim", message="hello")\n'
        f'w = await wait({SLOW_TOOL_SECONDS})\n{{"id": d["notification_id"], "w": w["seconds"]}}\n'
    )
    rec.scripted.set_script({"default": {"content": f"```python\n{program}```"}})
    source_id = f"code-fork-source-{uuid.uuid4().hex[:8]}"
    source = await rec.client.execute_workflow(
        AGENT_WORKFLOW,
        AgentInput(spec=agent_spec(mode="code", tools=["send_notification", "wait"]), input="notify"),
        id=source_id,
        task_queue=rec.task_queue,
        result_type=AgentResult,
    )
    assert source.status == "completed", source.status
    handle = await fork_run(
        rec.client, source_id, 2, data_converter=rec.client.data_converter, task_queue=rec.task_queue
    )
    await _until(lambda: _tool_call_pending(handle), timeout=SLOW_TOOL_SECONDS * 3)
    await rec.save("agent_code_mode_fork_waiting", handle)
    result = await handle.result()
    assert result.status == "completed", result.status


async def _session_fork(rec: Recorder) -> None:
    """A session forked inside a turn (``session.fork`` re-binds its state), saved between its turns."""
    rec.scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user", "contains": "weather"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                },
                {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "Paris: light rain"}},
                {"match": {"role": "user"}, "reply": {"content": "noted"}},
            ]
        }
    )
    source_id = f"session-fork-source-{uuid.uuid4().hex[:8]}"
    spec = agent_spec(tools=["get_weather"])
    for text in ("remember that I live in Paris", "what is the weather where I live?"):
        turn = await send_turn(rec.client, spec, text, session_id=source_id, task_queue=rec.task_queue)
        assert turn.status == "completed", turn.status
    fork_id, first = await fork_session(
        rec.client, source_id, 2, 1, data_converter=rec.client.data_converter, task_queue=rec.task_queue
    )
    assert first.status == "completed", first.status
    again = await continue_session(rec.client, fork_id, "thanks, remember that too")
    assert again.status == "completed", again.status
    await rec.save("session_fork_between_turns", rec.client.get_workflow_handle(fork_id))
    await close_session(rec.client, fork_id)
    await close_session(rec.client, source_id)


async def _session(rec: Recorder) -> None:
    """A tool-mode session saved between turns: two turns taken, waiting (idle) for the third."""
    rec.scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user", "contains": "weather"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                },
                {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "Paris: light rain"}},
                {"match": {"role": "user"}, "reply": {"content": "noted"}},
            ]
        }
    )
    session_id = f"session-{uuid.uuid4().hex[:8]}"
    spec = agent_spec(tools=["get_weather"])
    for text in ("remember that I live in Paris", "what is the weather where I live?"):
        turn = await send_turn(rec.client, spec, text, session_id=session_id, task_queue=rec.task_queue)
        assert turn.status == "completed", turn.status
    handle = rec.client.get_workflow_handle(session_id)
    await rec.save("session_between_turns", handle)
    await close_session(rec.client, session_id)


async def _session_streaming(rec: Recorder) -> None:
    """A session that streams its answers, has a call approved, then continues as new: its first run."""
    rec.scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user", "contains": "refund"},
                    "reply": {"tool_calls": [{"name": "refund", "arguments": {"order": "A-17", "amount": 40.0}}]},
                },
                {
                    "match": {"tool_result_for": "refund"},
                    "reply": {
                        "content": "Refunded 40 EUR for order A-17.",
                        "stream": {"chunk_chars": 3, "delay_seconds": 0.05},
                    },
                },
                {"match": {"role": "user"}, "reply": {"content": "noted"}},
            ]
        }
    )
    session_id = f"session-{uuid.uuid4().hex[:8]}"
    spec = agent_spec(tools=["refund"])
    config = SessionConfig(stream_tokens=True, continue_after_events=100)
    first = asyncio.ensure_future(
        send_turn(rec.client, spec, "refund A-17", session_id=session_id, task_queue=rec.task_queue, config=config)
    )

    async def waiting() -> bool:
        try:
            return bool(await pending_approvals(rec.client, session_id))
        except (RPCError, RunNotFoundError):  # not started yet
            return False

    await _until(waiting, timeout=30)
    [pending] = await pending_approvals(rec.client, session_id)
    await decide_approval(rec.client, session_id, pending.approval_id, approve=True, approver="recorder")
    assert (await first).output == "Refunded 40 EUR for order A-17."
    first_run = (await rec.client.get_workflow_handle(session_id).describe()).run_id
    for n in range(40):
        await send_turn(rec.client, spec, f"note {n}", session_id=session_id, task_queue=rec.task_queue, config=config)
        if (await session_state(rec.client, session_id)).continued:
            break
    assert (await session_state(rec.client, session_id)).continued == 1
    await rec.save("session_streamed_continued", rec.client.get_workflow_handle(session_id, run_id=first_run))
    await close_session(rec.client, session_id)


async def _session_state(rec: Recorder) -> None:
    """Issue 21's session (``SESSION_STATE_PATCH``): tools described at the first turn, which fails on one call
    while its sibling waits for approval (cancelled, withdrawn); then short turns until it continues as new.
    Saved: that first run, and the continued run (tools carried, not described) between two turns."""
    rec.scripted.set_script(
        {
            "rules": [
                {
                    "match": {"role": "user", "contains": "refund and audit"},
                    "reply": {
                        "tool_calls": [
                            {"name": "refund", "arguments": {"order": "A-17", "amount": 40.0}},
                            {"name": "audit", "arguments": {"seconds": 0}},
                        ]
                    },
                },
                {
                    "match": {"role": "user", "contains": "weather"},
                    "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                },
                {"match": {"tool_result_for": "get_weather"}, "reply": {"content": "sunny"}},
                {"match": {"role": "user"}, "reply": {"content": "noted"}},
            ]
        }
    )
    # The replayer names a history's workflow by its file name, and a continued run checks that its carried
    # state names its own session (workflow id and first run): so the session's id is its continued run's file name.
    session_id = f"{rec.prefix}session_continued_carried_tools"
    spec = agent_spec(tools=["refund", "audit", "get_weather"])
    config = SessionConfig(continue_after_events=100)

    async def send(text: str):
        return await send_turn(rec.client, spec, text, session_id=session_id, task_queue=rec.task_queue, config=config)

    try:
        await send("refund and audit A-17")
        raise AssertionError("the audit was meant to fail the turn")
    except WorkflowUpdateFailedError:
        pass
    assert await pending_approvals(rec.client, session_id) == []
    first_run = (await rec.client.get_workflow_handle(session_id).describe()).run_id
    for n in range(40):
        await send(f"note {n}")
        if (await session_state(rec.client, session_id)).continued:
            break
    assert (await session_state(rec.client, session_id)).continued == 1
    assert (await send("weather in Paris?")).output == "sunny"
    await rec.save("session_failed_turn_continued", rec.client.get_workflow_handle(session_id, run_id=first_run))
    await rec.save("session_continued_carried_tools", rec.client.get_workflow_handle(session_id))
    await close_session(rec.client, session_id)


async def _pipeline(rec: Recorder) -> None:
    loaded = load_pipeline_file(PIPELINE_FILE)
    email = {"sender": "kim@example.com", "subject": "PROJ-1", "body": "Please close PROJ-1, it works now."}
    inp = pipeline_input(loaded.spec, loaded.contracts, email)
    for step in inp.steps:
        if step.model is not None:
            step.model = LLMConfig(model=MODEL, max_tokens=256, context_window=16_000)
    update = {"issue_id": "PROJ-1", "state": "closed", "comment": "Customer confirms the fix."}
    reply = {"issue_id": "PROJ-1", "state": "closed", "message": "Thanks! Ticket PROJ-1 is now closed."}
    rec.scripted.set_script(
        {
            "rules": [
                {"match": {"any_contains": "triage customer emails"}, "reply": {"json": update}},
                {"match": {"any_contains": "friendly reply"}, "reply": {"json": reply}},
            ]
        }
    )
    handle = await rec.client.start_workflow(
        PIPELINE_WORKFLOW,
        inp,
        id=f"pipeline-{uuid.uuid4().hex[:8]}",
        task_queue=rec.task_queue,
        result_type=PipelineResult,
    )
    result = await handle.result()
    assert result.status == "completed", result.status
    await rec.save("pipeline", handle)


async def _monitor_tick(rec: Recorder, settings: WorkerSettings, state: Path) -> None:
    db, now = seed_tracker(state, issues=12)
    rec.scripted.set_script(nudge_script(assigned_issues(db), off_contract_first=[]))
    mcp = tracker_client({"tickets": tracker_server(db)}, secrets.token_hex(16))
    task_queue = f"{settings.task_queue}-monitor"
    try:
        async with monitor_worker(rec.client, settings, mcp, task_queue=task_queue):
            handle = await rec.client.start_workflow(
                MONITOR_WORKFLOW,
                MonitorInput(spec=monitor_spec(), as_of=now),
                id=f"monitor-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
                result_type=MonitorReport,
            )
            report = await handle.result()
            assert report.nudged and not report.failed, report
            await rec.save("monitor_tick", handle)
    finally:
        await mcp.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE.parent / "histories")
    parser.add_argument("--prefix", default="", help="file name prefix, e.g. the release: v0.1-")
    parser.add_argument("--only", help="comma-separated scenarios to record, e.g. session (default: all)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    written = asyncio.run(record(args.out, args.prefix, only))
    print("\n".join(written), flush=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # temporalio issue #300
