"""A workflow outside the engine, for tests/workflows/test_workflow_sandbox.py: its own module, because the
sandbox re-imports it for every run."""

from __future__ import annotations

import datetime

from temporalio import workflow


@workflow.defn(name="SandboxProbe")
class SandboxProbe:
    @workflow.run
    async def run(self) -> str:
        try:
            return f"read the wall clock: {datetime.datetime.now().isoformat()}"
        except Exception as exc:  # noqa: BLE001 - the sandbox's refusal is the answer
            return type(exc).__name__
