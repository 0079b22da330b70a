"""The worker decides a run's budget: a start names only its tenant, and whatever plan it sends is ignored.

Real dev server, real account workflows, real HTTP to the scripted model. Each
way a caller can start a run (Python with no plan, a forged plan, another
tenant's plan, a session, the ``agentsteps run`` CLI from a shell without the
worker's config, a raw ``temporal workflow start`` with JSON) is billed to the
tenant's account and limited by the hard budget of the worker's config.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from quota_support import settled_account, unique, with_quotas
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.dev_server import temporal_binary
from agentsteps.client.runs import start_agent_run
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.names import AGENT_WORKFLOW, SESSION_WORKFLOW, TURN_UPDATE
from agentsteps.contracts.quotas.plan import plan_for
from agentsteps.contracts.quotas.wire import QuotaPlan, QuotaRoute
from agentsteps.contracts.session import SessionConfig, SessionInput, TurnResult
from agentsteps.worker import running_worker

AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))
MODEL = "scripted-2026-01-01"
USAGE = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
SPEC = AgentSpec(name="billed", model=LLMConfig(model=MODEL, max_tokens=20, context_window=16_000), tools=[])


def _forged(tenant: str) -> QuotaPlan:
    """What a hostile backend sends: no budget account, a route to a quota nobody runs, a free price."""
    return QuotaPlan(
        tenant=tenant,
        tenant_label=tenant,
        tenant_account=None,
        routes=[QuotaRoute(quota="nothing", provider="openai", model="*", account="agentsteps-quota-nothing")],
        prices={MODEL: (0.0, 0.0)},
    )


async def _agentsteps_run(temporal_env, task_queue: str, tenant: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """``agentsteps run --tenant`` from a shell with no config: no file, no AGENTSTEPS_CONFIG, no quota table."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "billed"\ntools = []\n[model]\nmodel = "{MODEL}"\nmax_tokens = 20\n')
    host, _, port = temporal_env.client.service_client.config.target_host.rpartition(":")
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSTEPS_CONFIG", "TEMPORAL_ADDRESS")}
    env.update(AGENTSTEPS_DEV_PORT=port, AGENTSTEPS_TASK_QUEUE=task_queue, AGENTSTEPS_STATE_DIR=str(tmp_path / "cli"))
    args = [AGENTSTEPS, "run", "--spec", str(spec), "--input", "hello", "--tenant", tenant, "--no-worker"]
    # In a thread: the worker answering the CLI runs on this test's event loop.
    return await asyncio.to_thread(
        subprocess.run, args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


async def _temporal_start(temporal_env, task_queue: str, tenant: str, plan: dict | None = None) -> str:
    """A backend in another language: ``temporal workflow start`` with plain JSON, a forged plan if given."""
    workflow_id = f"raw-{uuid.uuid4().hex[:8]}"
    payload: dict = {"spec": json.loads(SPEC.model_dump_json()), "input": "hello", "tenant": tenant}
    if plan is not None:
        payload["quota"] = plan
    address = temporal_env.client.service_client.config.target_host
    args = [temporal_binary(), "workflow", "start", "--address", address, "--type", AGENT_WORKFLOW]
    args += ["--task-queue", task_queue, "--workflow-id", workflow_id, "--input", json.dumps(payload)]
    await asyncio.to_thread(subprocess.run, args, check=True, capture_output=True)
    return workflow_id


async def test_every_way_of_starting_a_run_is_billed_and_limited_as_the_workers_config_says(
    temporal_env, client, settings, scripted, tmp_path
):
    scripted.set_script({"default": {"content": "hi", "usage": USAGE}})
    billed, other, broke = unique("billed"), unique("other"), unique("broke")
    configured = with_quotas(
        settings,
        tenants=[
            {"name": billed, "budget": {"day": {"tokens_hard": 1_000_000}}},
            {"name": other, "budget": {"day": {"tokens_hard": 1_000_000}}},
            # A hard limit below any call's reservation: every call of this tenant is refused.
            {"name": broke, "budget": {"day": {"tokens_hard": 5}}},
        ],
    )
    queue = configured.task_queue
    others_plan = plan_for(configured.quotas, {}, other)
    assert others_plan is not None

    async def python_start(tenant: str, plan: QuotaPlan | None) -> str:
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=SPEC, input="hello", tenant=tenant, quota=plan),
            id=unique("py"),
            task_queue=queue,
        )
        return handle.id

    async def session_turn(tenant: str, plan: QuotaPlan | None) -> TurnResult:
        handle = await client.start_workflow(
            SESSION_WORKFLOW,
            SessionInput(spec=SPEC, session=SessionConfig(), tenant=tenant, quota=plan),
            id=unique("session"),
            task_queue=queue,
        )
        return await handle.execute_update(TURN_UPDATE, {"input": "hello"}, result_type=TurnResult)

    async with running_worker(client, configured, registry=ToolRegistry()):
        ids = [
            await python_start(billed, None),  # no plan
            await python_start(billed, _forged(billed)),  # a forged plan: no budget account
            await python_start(billed, others_plan),  # another tenant's plan: its account, its label
            await _temporal_start(temporal_env, queue, billed),
            await _temporal_start(temporal_env, queue, billed, json.loads(_forged(billed).model_dump_json())),
        ]
        with pytest.warns(DeprecationWarning, match="quota= is ignored"):  # our client: warned, never sent
            ours = await start_agent_run(client, SPEC, "hello", task_queue=queue, tenant=billed, quota=_forged(billed))
        ids.append(ours.id)
        results = [await client.get_workflow_handle(i, result_type=AgentResult).result() for i in ids]
        started = (await ours.fetch_history()).events[0].workflow_execution_started_event_attributes
        sent = json.loads(started.input.payloads[0].data)
        turn = await session_turn(billed, _forged(billed))
        cli = await _agentsteps_run(temporal_env, queue, billed, tmp_path)
        spent = await settled_account(client, "tenant", billed)
        untouched = await settled_account(client, "tenant", other)

        refused = [
            await python_start(broke, None),
            await python_start(broke, _forged(broke)),
            await _temporal_start(temporal_env, queue, broke, json.loads(_forged(broke).model_dump_json())),
        ]
        failures = []
        for workflow_id in refused:
            with pytest.raises(WorkflowFailureError) as failure:
                await client.get_workflow_handle(workflow_id).result()
            failures.append(failure.value.cause)
        try:
            turn_refused = repr(await session_turn(broke, _forged(broke)))
        except WorkflowUpdateFailedError as exc:
            turn_refused = f"{exc.cause!r} {exc.cause.cause!r}"
        broke_cli = await _agentsteps_run(temporal_env, queue, broke, tmp_path)

    assert [r.status for r in results] == ["completed"] * 6
    assert sent.get("quota") is None and sent["tenant"] == billed
    assert turn.status == "completed"
    assert cli.returncode == 0, cli.stderr
    assert spent.spent["day"].tokens == 8 * 30, "all eight calls billed to the tenant the worker's config names"
    assert untouched.spent["day"].tokens == 0, "another tenant's plan bills nothing to that tenant"
    assert all(isinstance(c, ApplicationError) and c.type == "BudgetExceededError" for c in failures), failures
    assert all(broke in str(c) and "day" in str(c) for c in failures)
    assert "BudgetExceededError" in turn_refused and broke in turn_refused, turn_refused
    assert broke_cli.returncode == 1 and "budget" in broke_cli.stderr.lower(), broke_cli.stderr
    assert len(scripted.requests) == 8, "no refused call reached the provider"


async def test_a_worker_without_quotas_ignores_a_plan_that_names_accounts(client, settings, scripted):
    """A plan naming an account no worker runs would fail a run that honoured it; the worker's (none) holds."""
    scripted.set_script({"default": {"content": "hi", "usage": USAGE}})
    tenant = unique("nobody")
    forged = _forged(tenant).model_copy(update={"tenant_account": f"agentsteps-tenant-{tenant}"})
    async with running_worker(client, settings, registry=ToolRegistry()):
        handle = await client.start_workflow(
            AGENT_WORKFLOW,
            AgentInput(spec=SPEC, input="hello", tenant=tenant, quota=forged),
            id=unique("py"),
            task_queue=settings.task_queue,
            result_type=AgentResult,
        )
        result = await handle.result()
        events = [
            e
            for e in (await handle.fetch_history()).events
            if e.HasField("signal_external_workflow_execution_initiated_event_attributes")
        ]

    assert result.status == "completed"
    assert events == [], "no quota command: this worker's config has no quota and no budget"
