"""``agentsteps quota`` and ``agentsteps budget``: read and change live limits (the shell over ``client/quotas.py``).

    agentsteps quota show NAME [--json]
    agentsteps quota set NAME [--rpm N] [--input-tpm N] [--output-tpm N] [--concurrent N] [--json]
    agentsteps budget show TENANT [--json]
    agentsteps budget set TENANT [--weight W] [--period day|month --tokens-soft N --tokens-hard N
                                   --usd-soft X --usd-hard X] [--json]

A change goes to the running account at once (runs waiting on it see it); the
config file only seeds an account that is not running yet.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from ..contracts.errors import QuotaConfigError
from ..contracts.quotas.wire import AccountKind, AccountView
from .json_output import QUOTA_ACCOUNT, print_json


def quota_command(args: argparse.Namespace, kind: AccountKind) -> int:
    """``agentsteps quota|budget show|set NAME``; the arguments are ``cli.arguments.quota_arguments``'."""
    return asyncio.run(_command(args, kind))


def _change(args: argparse.Namespace, kind: AccountKind) -> dict[str, Any]:
    if kind == "quota":
        keys = ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute", "concurrent_requests")
        return {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    change: dict[str, Any] = {} if args.weight is None else {"weight": args.weight}
    budget = {
        k: getattr(args, k)
        for k in ("tokens_soft", "tokens_hard", "usd_soft", "usd_hard")
        if getattr(args, k) is not None
    }
    if budget and args.period is None:
        raise QuotaConfigError.with_message("--tokens-*/--usd-* need --period day|month")
    if args.period is not None:
        change.update(period=args.period, budget=budget)
    return change


async def _command(args: argparse.Namespace, kind: AccountKind) -> int:
    from ..client.connection import connect
    from ..client.quotas import read_account, set_limits
    from ..client.settings import load_settings

    settings = load_settings(getattr(args, "config", None))
    client = await connect(settings)
    if getattr(args, "change", False):
        change = _change(args, kind)
        if not change:
            raise QuotaConfigError.with_message("nothing to change: give at least one limit")
        view = await set_limits(client, kind, args.name, change)
    else:
        view = await read_account(client, kind, args.name)
    if args.json:
        print_json(QUOTA_ACCOUNT, view.model_dump(mode="json"), indent=None)
    else:
        print(summary(view), file=sys.stdout)
    return 0


def _limit(tokens: int | None, usd: float | None) -> str:
    """A budget limit as a reader says it: ``500 tokens``, ``$5``, ``500 tokens or $5``, ``none``."""
    parts = ([f"{tokens} tokens"] if tokens is not None else []) + ([f"${usd:g}"] if usd is not None else [])
    return " or ".join(parts) or "none"


def summary(view: AccountView) -> str:
    if view.quota is not None:
        q = view.quota
        e = view.effective or q
        lines = [f"quota {view.name} ({q.provider} {q.model}, key {q.api_key})"]
        for label, used, limit, configured in (
            ("requests/min", view.requests_in_window, e.requests_per_minute, q.requests_per_minute),
            ("input tokens/min", view.input_tokens_in_window, e.input_tokens_per_minute, q.input_tokens_per_minute),
            ("output tokens/min", view.output_tokens_in_window, e.output_tokens_per_minute, q.output_tokens_per_minute),
            ("concurrent", view.concurrent, q.concurrent_requests, q.concurrent_requests),
        ):
            shown = limit if limit is not None else "unlimited"
            # Lowered after a provider 429: the limit in force, then the configured one it climbs back to.
            lowered = f" (configured {configured})" if limit != configured else ""
            lines.append(f"  {label:<18} {used} / {shown}{lowered}")
        if view.effective_factor < 1.0:
            lines.append(
                f"  throttled          limits at {view.effective_factor:.0%} after a provider 429, "
                "climbing back each window without one"
            )
        lines.append(f"  waiting            {view.waiting}")
        lines.append(f"  utilization        {view.utilization:.0%}")
        return "\n".join(lines)
    assert view.tenant is not None
    t = view.tenant
    lines = [f"tenant {view.name} (weight {t.weight:g})"]
    for period, budget in t.budget.items():
        spent = view.spent.get(period)
        soft, hard = _limit(budget.tokens_soft, budget.usd_soft), _limit(budget.tokens_hard, budget.usd_hard)
        lines.append(
            f"  {period}: {spent.tokens if spent else 0} tokens, ${spent.usd if spent else 0:.4f} spent"
            f" (soft: {soft}; hard: {hard})"
        )
    lines.append(f"  in flight: {view.reserved_tokens} tokens, ${view.reserved_usd:.4f} reserved")
    if t.degrade_to:
        lines.append(f"  past a soft limit: {', '.join(m.model for m in t.degrade_to)}")
    return "\n".join(lines)
