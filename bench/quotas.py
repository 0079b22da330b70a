"""Provider quotas and tenant fairness: quotas on against quotas off, in one run.

Two tenants ("light", weight 1, and "heavy", weight 3) each keep 100 runs in
flight (a closed loop: a finished run is replaced at once) against one model
whose provider quota (the scripted model, in its own process, answering 429
beyond it) the load exceeds several times over. Each run is one model call
whose answer is exactly ``max_tokens`` long, so the output tokens per window
are the binding limit on both sides, measured exactly.

- ``quotas_off``: a worker without ``[worker.quotas]``; the provider's 429s are
  retried by Temporal with ``Retry-After``, as without this feature.
- ``quotas_on``: the same quota declared in ``[worker.quotas]``; every call
  waits for its grant from the ``QuotaAccount`` workflow, shared by weight.

Measured over the steady part of each phase (after one window of warm-up):
``http_429`` (every 429 the provider sent in the phase), ``share_by_tenant``
(quotas on: each tenant's share of the tokens the quota's account granted in
the span; quotas off, where no account exists: of the output tokens of calls
that ended in the span), ``share_completed_by_tenant`` (the latter, for both),
``weight_by_tenant`` (each tenant's share of the weights) and ``utilization``
(output tokens of calls that ended in the span against the quota over it).
On a loaded machine the worker finishes granted runs more slowly than the
account grants them, so the completed share lags the granted one.

The default is short (10 s windows, ~35 s a phase); ``--long`` uses the real
one-minute window for 4 minutes a phase. The last line is one JSON object.

    .venv/bin/python bench/quotas.py [--long] [--runs 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from model_process import free_port, scripted_model_process
from temporalio.testing import WorkflowEnvironment

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.client.quotas import read_account
from agentsteps.contracts import AgentInput, AgentResult, AgentSpec, LLMConfig
from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings
from agentsteps.contracts.names import AGENT_WORKFLOW
from agentsteps.contracts.quotas.config import QuotaSettings
from agentsteps.contracts.spec import ActivityPolicy
from agentsteps.worker import connect, running_worker

MODEL = "scripted-2026-01-01"
MAX_TOKENS = 20
WEIGHTS = {"light": 1.0, "heavy": 3.0}


def _script(output_per_window: int, window: float) -> dict:
    return {
        "default": {"content": "ok", "usage": {"completion_tokens": MAX_TOKENS}, "delay_seconds": 0.2},
        "quotas": {MODEL: {"output_tokens_per_minute": output_per_window, "window_seconds": window}},
    }


def _spec() -> AgentSpec:
    # Retried as long as a 429 keeps coming: quotas off must not lose runs, only time.
    policy = ActivityPolicy(max_attempts=100, initial_interval_seconds=0.5, maximum_interval_seconds=10)
    return AgentSpec(
        name="bench-quota",
        model=LLMConfig(model=MODEL, max_tokens=MAX_TOKENS),
        tools=[],
        max_steps=1,
        llm_policy=policy,
        system_prompt="Answer briefly.",
    )


async def _phase(
    client,
    settings: WorkerSettings,
    stats_url: str,
    *,
    plans: bool,
    runs: int,
    seconds: float,
    warmup: float,
    output_per_window: int,
    window: float,
) -> dict:
    spec = _spec()
    done: list[tuple[float, str, int]] = []  # (ended at, tenant, output tokens)
    failed = 0
    stop_at = time.monotonic() + seconds

    async def loop(tenant: str) -> None:
        nonlocal failed
        while time.monotonic() < stop_at:
            handle = await client.start_workflow(
                AGENT_WORKFLOW,
                AgentInput(spec=spec, input=f"hello from {tenant}", tenant=tenant),
                id=f"bench-{tenant}-{uuid.uuid4().hex[:10]}",
                task_queue=settings.task_queue,
                result_type=AgentResult,
            )
            try:
                result = await handle.result()
            except Exception:
                failed += 1
                continue
            done.append((time.monotonic(), tenant, result.usage.completion_tokens))

    async with httpx.AsyncClient() as http:
        before = (await http.get(stats_url)).json()
        started = time.monotonic()
        tasks = [asyncio.create_task(loop(t)) for t in WEIGHTS for _ in range(runs)]
        await asyncio.sleep(warmup)
        span_start = time.monotonic()
        served_before = (await read_account(client, "quota", "bench")).served_per_weight if plans else {}
        waiting: list[int] = []
        while time.monotonic() < stop_at:
            if plans:  # how many calls the account holds in its queue: fairness needs both tenants there
                view = await read_account(client, "quota", "bench")
                waiting.append(view.waiting)
            await asyncio.sleep(min(2.0, max(0.0, stop_at - time.monotonic())))
        span_end = time.monotonic()
        served_after = (await read_account(client, "quota", "bench")).served_per_weight if plans else {}
        await asyncio.gather(*tasks)  # the runs in flight finish (counted only if they ended in the span)
        after = (await http.get(stats_url)).json()
    in_span = [(t, tokens) for at, t, tokens in done if span_start <= at <= span_end]
    total = sum(tokens for _, tokens in in_span) or 1
    completed = {t: round(sum(k for u, k in in_span if u == t) / total, 3) for t in WEIGHTS}
    share = completed
    if plans:  # what the account granted each tenant in the span (served per weight, times the weight)
        granted = {t: (served_after.get(t, 0.0) - served_before.get(t, 0.0)) * w for t, w in WEIGHTS.items()}
        share = {t: round(g / (sum(granted.values()) or 1), 3) for t, g in granted.items()}
    capacity = output_per_window * (span_end - span_start) / window
    return {
        "http_429": after["http_429"] - before["http_429"],
        "share_by_tenant": share,
        "share_completed_by_tenant": completed,
        "weight_by_tenant": {t: round(w / sum(WEIGHTS.values()), 3) for t, w in WEIGHTS.items()},
        "utilization": round(sum(tokens for _, tokens in in_span) / capacity, 3),
        "calls_in_span": len(in_span),
        "runs_failed": failed,
        "queued_at_account_median": sorted(waiting)[len(waiting) // 2] if waiting else None,
        "seconds": round(time.monotonic() - started, 1),
    }


async def main(args: argparse.Namespace) -> dict:
    window = 60.0 if args.long else 10.0
    seconds = 240.0 if args.long else 35.0
    # The load: 200 runs in flight, each call 20 output tokens; the quota serves ~6 calls a second.
    output_per_window = int(6 * MAX_TOKENS * window)
    port = free_port()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
        dev_server_log_level="error",
    )
    try:
        with (
            tempfile.TemporaryDirectory() as state,
            scripted_model_process(_script(output_per_window, window), port) as model,
        ):
            quotas = QuotaSettings.model_validate(
                {
                    "limits": [
                        {
                            "name": "bench",
                            "model": MODEL,
                            "output_tokens_per_minute": output_per_window,
                            "window_seconds": window,
                            "lease_seconds": 120,
                        }
                    ],
                    "tenants": [{"name": t, "weight": w} for t, w in WEIGHTS.items()],
                }
            )
            settings = WorkerSettings(
                state_dir=Path(state),
                task_queue=f"bench-quotas-{uuid.uuid4().hex[:6]}",
                quotas=quotas,
                providers=ProviderSettings(
                    openai_base_url=model.url, request_timeout_seconds=30, retry_after_cap_seconds=window
                ),
            )
            client = await connect(settings, env.client.service_client.config.target_host)
            stats_url = model.url.removesuffix("/v1") + "/stats"
            common = dict(
                runs=args.runs, seconds=seconds, warmup=window, output_per_window=output_per_window, window=window
            )

            def serving(worker_settings: WorkerSettings):  # the worker's config decides whether runs take quotas
                return running_worker(
                    client,
                    worker_settings,
                    registry=ToolRegistry(),
                    max_concurrent_activities=400,
                    max_concurrent_workflow_tasks=100,
                )

            async with serving(settings.model_copy(update={"quotas": QuotaSettings()})):
                off = await _phase(client, settings, stats_url, plans=False, **common)
                print(f"quotas off: {off}", file=sys.stderr, flush=True)
            await asyncio.sleep(window * 1.2)  # the provider's window empties between the phases
            async with serving(settings):
                on = await _phase(client, settings, stats_url, plans=True, **common)
                print(f"quotas on:  {on}", file=sys.stderr, flush=True)
    finally:
        await env.shutdown()
    return {"window_seconds": window, "runs_per_tenant": args.runs, "quotas_on": on, "quotas_off": off}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--long", action="store_true", help="one-minute windows, 4 minutes a phase")
    parser.add_argument("--runs", type=int, default=100, help="runs each tenant keeps in flight")
    result = asyncio.run(main(parser.parse_args()))
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # temporalio issue #300
