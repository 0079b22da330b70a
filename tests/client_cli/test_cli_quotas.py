"""``agentsteps quota`` / ``agentsteps budget``: an operator reads and raises a live limit, in text or pinned JSON."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from cli_json_support import pinned
from quota_support import unique, with_quotas

from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.cli import json_output
from agentsteps.worker import running_worker

AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))


async def _cli(args: list[str], address: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSTEPS_CONFIG",)}
    env["TEMPORAL_ADDRESS"] = address
    # In a thread: the worker answering the CLI runs on this test's event loop.
    return await asyncio.to_thread(
        subprocess.run, [AGENTSTEPS, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


async def test_an_operator_reads_and_raises_quota_and_budget_limits_while_the_accounts_run(
    temporal_env, client, settings, tmp_path
):
    quota, tenant = unique("cliq"), unique("clit")
    configured = with_quotas(
        settings,
        limits=[{"name": quota, "model": "gpt-4o*", "requests_per_minute": 100, "concurrent_requests": 4}],
        tenants=[{"name": tenant, "weight": 2, "budget": {"day": {"tokens_hard": 1000, "usd_hard": 5.0}}}],
    )
    address = temporal_env.client.service_client.config.target_host
    async with running_worker(client, configured, registry=ToolRegistry()):
        shown = await _cli(["quota", "show", quota], address, tmp_path)
        raised = await _cli(["quota", "set", quota, "--rpm", "500", "--json"], address, tmp_path)
        budget = await _cli(
            ["budget", "set", tenant, "--period", "day", "--tokens-hard", "5000", "--json"], address, tmp_path
        )
        weighted = await _cli(["budget", "show", tenant], address, tmp_path)
        hostile = await _cli(["quota", "set", quota, "--concurrent", "-3"], address, tmp_path)
        nothing = await _cli(["quota", "set", quota], address, tmp_path)
        absent = await _cli(["budget", "show", unique("nobody"), "--json"], address, tmp_path)

    assert shown.returncode == 0, shown.stderr
    assert f"quota {quota} (openai gpt-4o*" in shown.stdout and "requests/min       0 / 100" in shown.stdout
    assert raised.returncode == 0, raised.stderr
    assert pinned(raised.stdout, json_output.QUOTA_ACCOUNT)["quota"]["requests_per_minute"] == 500
    assert budget.returncode == 0, budget.stderr
    day = pinned(budget.stdout, json_output.QUOTA_ACCOUNT)["tenant"]["budget"]["day"]
    assert (day["tokens_hard"], day["usd_hard"]) == (5000, 5.0), "the period's other limit stays"
    assert f"tenant {tenant} (weight 2)" in weighted.stdout
    assert hostile.returncode == 2 and "QuotaConfigError" not in hostile.stdout
    assert "invalid limit change" in hostile.stderr and "greater than 0" in hostile.stderr
    assert hostile.stderr.strip().startswith("error: QuotaConfigError: invalid limit change (nothing changed): ")
    assert len(hostile.stderr.strip().splitlines()) == 1, "one line, not pydantic's dump"
    assert nothing.returncode == 2 and "nothing to change" in nothing.stderr
    assert absent.returncode == 2 and "no tenant account named" in absent.stderr
    assert pinned(absent.stdout, json_output.ERROR)["error"]["type"] == "QuotaConfigError"  # the one document


def test_quota_show_prints_each_limit_in_force_beside_the_configured_one_after_a_provider_429():
    from agentsteps.cli.quotas import summary
    from agentsteps.contracts.quotas.config import QuotaLimit
    from agentsteps.contracts.quotas.ledger import Ledger, LedgerState
    from agentsteps.contracts.quotas.wire import LeaseRelease

    ledger = Ledger(
        LedgerState(
            quota=QuotaLimit(name="gpt4o", requests_per_minute=6, input_tokens_per_minute=9000, concurrent_requests=4)
        )
    )
    assert "configured" not in summary(ledger.view(0.0)) and "throttled" not in summary(ledger.view(0.0))
    ledger.release(LeaseRelease(request_id="r", throttled=True), 0.0)
    text = summary(ledger.view(1.0))
    assert "requests/min       0 / 3 (configured 6)" in text
    assert "input tokens/min   0 / 4500 (configured 9000)" in text
    assert "concurrent         0 / 4\n" in text, "concurrency is not lowered"
    assert "throttled          limits at 50% after a provider 429" in text
