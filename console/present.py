"""How values look on a page: numbers, money, times, a call's arguments, a violation's handling.

Pure functions the templates call. They return plain text; the templates
escape it (autoescape), so nothing here builds HTML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

from ..contracts import Message, Step
from ..contracts.approvals import PendingApproval, card_anchor
from ..contracts.config.settings import ConsoleSettings
from ..contracts.llm.reprompt import reprompt_messages
from ..contracts.spec import AgentResult
from .reads import Row

GRAFANA_DASHBOARD = "agentsteps-oncall"
"""The uid of deploy/grafana/dashboards/agentsteps.json."""


def number(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(value: datetime | None) -> str:
    """For ``<time datetime>``: the page shows it in the viewer's own zone (the UTC text is the fallback)."""
    return "" if value is None else value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def card_key(workflow_id: str, approval_id: str) -> str:
    """A waiting call's element id on a page: stable across live updates, no identifier shown."""
    return card_anchor(workflow_id, approval_id)


def headline(pending: PendingApproval) -> str:
    """What the call would do, in the tool's own words: its description's first sentence, else its name."""
    first = pending.description.strip().split("\n", 1)[0].split(". ", 1)[0].strip().rstrip(".")
    if first and len(first) <= 90:
        return first
    return pending.tool.replace("_", " ").replace(".", " ").strip().capitalize() or pending.tool


def summary(pending: PendingApproval, shown: int = 3) -> str:
    """The first few arguments on one line ("Order A-17 · Amount 40.0"), for the compact card."""
    rows = arguments(pending)
    if isinstance(rows, str):
        return rows[:120]
    parts = [f"{a.label}: {' '.join(a.value.split())[:60]}" for a in rows[:shown]]
    return " · ".join(parts) + (" · …" if len(rows) > shown else "")


def _auto_title(name: str) -> str:
    """The title pydantic makes up from a field's name (``amount_eur`` -> ``Amount Eur``): not a label."""
    return " ".join(part.capitalize() for part in name.replace("-", "_").split("_") if part)


def link(row: Row) -> str:
    return f"/{'sessions' if row.kind == 'session' else 'runs'}/{quote(row.workflow_id, safe='')}"


def output(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Argument:
    title: str
    """The argument's name as its schema titles it (or its name)."""
    value: str
    description: str = ""
    required: bool = False
    label: str = ""
    """What a person reads: a title someone wrote, else the description, else the name in words."""


def arguments(pending: PendingApproval) -> list[Argument] | str:
    """The call's arguments as the tool's schema describes them; the raw text when they are not an object."""
    try:
        values = json.loads(pending.arguments)
    except ValueError:
        return pending.arguments
    if not isinstance(values, dict):
        return pending.arguments
    schema = pending.input_schema or {}
    declared = schema.get("properties")
    properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
    listed = schema.get("required")
    required = set(listed) if isinstance(listed, list) else set()
    rows = []
    for name in [*(n for n in properties if n in values), *(n for n in values if n not in properties)]:
        described = properties.get(name)
        prop: dict[str, Any] = described if isinstance(described, dict) else {}
        titled = prop.get("title")
        title = titled if isinstance(titled, str) else name
        described = prop.get("description")
        description = described.strip() if isinstance(described, str) else ""
        if isinstance(titled, str) and titled.strip() and titled != _auto_title(str(name)):
            label = titled.strip()
        elif description and len(description) <= 60:
            label, description = description.rstrip("."), ""
        else:
            label = str(name).replace("_", " ").strip().capitalize() or str(name)
        rows.append(
            Argument(
                title=str(title),
                value=output(values[name]),
                description=description if name in properties else "(not in the tool's schema)",
                required=name in required,
                label=label,
            )
        )
    return rows


def step_kind(step: Step) -> str:
    return {"assistant": "answer that broke its contract", "tool_call": "tool calls", "final": "final answer"}.get(
        step.kind, step.kind
    )


def handled(step: Step, result: AgentResult | None, steps: list[Step]) -> str:
    """How the engine answered a violated step: a fallback, the default result, or a re-prompt."""
    degradations = result.degradations if result is not None else []
    for d in degradations:
        if d.step == step.index:
            return (
                "Handled: the default result was used."
                if d.to == "default_result"
                else f"Handled: fell back to {d.to}."
            )
    if step.kind == "assistant" or any(s.index > step.index for s in steps):
        return "Handled: the model was re-prompted with the violations (below)."
    return "Not handled yet."


def reprompt(step: Step) -> str:
    if not step.violations:
        return ""
    messages = reprompt_messages(Message(role="assistant", content=step.content or ""), step.violations)
    return "\n\n".join(m.content or "" for m in messages[1:])


def temporal_link(settings: ConsoleSettings, namespace: str, row: Row) -> str:
    if not settings.temporal_ui_url:
        return ""
    base = settings.temporal_ui_url.rstrip("/")
    workflow_id, run_id = quote(row.workflow_id, safe=""), quote(row.run_id, safe="")
    return f"{base}/namespaces/{quote(namespace, safe='')}/workflows/{workflow_id}/{run_id}/history"


def grafana_link(settings: ConsoleSettings, namespace: str, row: Row, model: str) -> str:
    """The on-call dashboard on the run's time window, its namespace and model (metrics carry no run id)."""
    if not settings.grafana_url:
        return ""
    start = row.started or datetime.now(timezone.utc)
    end = row.closed or datetime.now(timezone.utc)
    params = {
        "from": int(start.timestamp() * 1000) - 60_000,
        "to": int(end.timestamp() * 1000) + 60_000 if row.closed else "now",
        "var-namespace": namespace,
    }
    if model:
        params["var-model"] = model
    return f"{settings.grafana_url.rstrip('/')}/d/{GRAFANA_DASHBOARD}/agentsteps?{urlencode(params)}"


__all__ = [
    "Argument",
    "arguments",
    "card_key",
    "headline",
    "iso",
    "summary",
    "grafana_link",
    "handled",
    "link",
    "money",
    "number",
    "output",
    "reprompt",
    "step_kind",
    "temporal_link",
    "when",
]
