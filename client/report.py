"""Human-readable output of runs, shared by ``run`` and ``demo``."""

from __future__ import annotations

import json
from typing import TextIO

from ..contracts import AgentResult, Step


def print_progress(step: Step, out: TextIO) -> None:
    calls = ", ".join(f"{c.name}{' (error)' if c.is_error else ''}" for c in step.tool_calls)
    flagged = "".join(f"\n      violation: {v.kind.value} at {v.path}" for v in step.violations)
    print(
        f"  step {step.index}: {step.kind}{' -> ' + calls if calls else ''}"
        f" ({step.model}, {step.usage.total_tokens} tokens){flagged}",
        file=out,
        flush=True,
    )


def print_result(result: AgentResult, out: TextIO) -> None:
    print(f"status: {result.status}", file=out)
    output = result.output if isinstance(result.output, str) else json.dumps(result.output, indent=2)
    print(f"final answer ({result.model or 'default'}):\n{_indent(output)}", file=out)
    print(f"steps: {len(result.steps)} (kinds: {', '.join(step.kind for step in result.steps)})", file=out)
    u = result.usage
    print(f"usage: {u.prompt_tokens} prompt + {u.completion_tokens} completion = {u.total_tokens} tokens", file=out)
    if result.violations:
        print("contract violations handled:", file=out)
        for v in result.violations:
            print(f"  - {v.contract} {v.phase} {v.kind.value} at {v.path}: {v.message}", file=out)
    for d in result.degradations:
        print(f"degraded at step {d.step}: {d.from_model} -> {d.to} ({d.reason.kind.value})", file=out)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines() or [""])
