"""The soak's side effect (``bench/soak.py``, ``tests/e2e/test_soak_e2e.py``): one tool a deployed worker loads
through ``tool_factories = ["soak_support:build_registry"]``.

``record(step="S<i>-<k>")`` is session ``i``'s logical step ``k``. Each call is
written to the SQLite ledger at ``$SOAK_LEDGER`` shared by every worker
process (``scale_support.Ledger``): one ``effects`` row per idempotency key,
with the session id and ``k``, and one ``attempts`` row per try. A step done
twice under two keys (a repeated call) shows as two rows with the same ``k``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel, Field
from scale_support import Ledger
from temporalio import activity

from agentsteps.activities.tools.registry import ToolContext, ToolRegistry
from agentsteps.contracts.config.settings import WorkerSettings

STEP = r"^S\d+-\d+$"


class RecordArgs(BaseModel):
    step: str = Field(pattern=STEP, max_length=20)


class Recorded(BaseModel):
    step: str


def build_registry(settings: WorkerSettings) -> ToolRegistry:
    registry = ToolRegistry()
    ledger = Ledger(Path(os.environ["SOAK_LEDGER"]))

    @registry.tool(side_effects=True)
    async def record(args: RecordArgs, ctx: ToolContext) -> Recorded:
        """Record a session's step (a side effect: once per idempotency key)."""
        k = int(args.step.split("-")[1])
        attempt = await asyncio.to_thread(ledger.begin, ctx.idempotency_key, activity.info().workflow_id, k)
        await asyncio.to_thread(ledger.finish, attempt)
        return Recorded(step=args.step)

    return registry
