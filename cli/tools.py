"""``agentsteps tools list`` and ``agentsteps tools call``: inspect and exercise tools from a shell.

Both go through the worker's own code (``ToolActivities`` over the Python
registry plus the MCP servers of the config file), so what an operator sees is
what a run gets. Secrets come from the secrets folder (``$AGENTSTEPS_SECRETS_DIR``)
or the environment, exactly as in the worker.

``list`` shows every reachable tool and each MCP server's state (up, down,
misconfigured, circuit_open) instead of failing as a whole.

Exit codes: 0 ok; 1 the tool returned an error, a server failed (``call``) or
a ``required`` server is not up (``list``); 2 bad input or config.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.exceptions import ApplicationError

from ..contracts import AgentStepsError, InvalidSpecError
from ..contracts.llm.tools import ToolCallInput, ToolSchema, result_value
from ..contracts.mcp import McpConfigError, McpError
from ..failures import from_failure
from .json_output import TOOLS_LIST, print_json

if TYPE_CHECKING:
    from ..activities.mcp import McpActivities
    from ..activities.tools.activities import ToolActivities
    from ..activities.tools.registry import ToolRegistry

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def tools_list(config_path: str | Path | None, as_json: bool) -> int:
    return _guarded(lambda: _tools_list(config_path, as_json))


def tools_call(name: str, args_json: str, config_path: str | Path | None) -> int:
    return _guarded(lambda: _tools_call(name, args_json, config_path))


def _guarded(run: Callable[[], Coroutine[Any, Any, int]]) -> int:
    try:
        return asyncio.run(run())
    except (McpConfigError, InvalidSpecError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (McpError, AgentStepsError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except ApplicationError as exc:  # an MCP failure raised through the ToolSource
        print(f"error: {exc.type or 'ApplicationError'}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT if isinstance(from_failure(exc), McpConfigError) else EXIT_FAILED


def _build(config_path: str | Path | None) -> tuple[ToolRegistry, McpActivities, ToolActivities]:
    from ..activities.tools.activities import ToolActivities
    from ..client.settings import load_settings
    from ..worker import build_mcp, load_registry

    settings = load_settings(config_path)
    registry = load_registry(settings)
    mcp = build_mcp(settings)
    return registry, mcp, ToolActivities(registry, [mcp.source()])


async def _tools_list(config_path: str | Path | None, as_json: bool) -> int:
    registry, mcp, _ = _build(config_path)
    try:
        python_tools = list(registry.schemas().values())
        mcp_tools = await mcp.fleet.describe()  # every reachable server's tools; the others say why below
        servers = mcp.fleet.report()
    finally:
        await mcp.aclose()
    shadowed = {t.name for t in python_tools} & {t.name for t in mcp_tools}
    everything = python_tools + [t for t in mcp_tools if t.name not in shadowed]
    if as_json:
        print_json(TOOLS_LIST, {"tools": [t.model_dump(mode="json") for t in everything], "servers": servers})
    else:
        print(_table(everything))
        for tool in everything:
            print(_describe(tool))
        if servers:
            print("MCP servers:")
        for name, health in servers.items():
            detail = f" since {health['since']}: {health['last_error']}" if health["state"] != "up" else ""
            print(f"  {name}  {health['state']}{' (required)' if health['required'] else ''}{detail}")
        for name in sorted(shadowed):
            print(
                f"warning: MCP tool {name!r} is hidden by the Python tool of the same name; "
                "set tool_prefix on its server",
                file=sys.stderr,
            )
    # One optional server down is shown, not fatal; a required one is a failure, as in /readyz.
    return EXIT_OK if mcp.fleet.ready() else EXIT_FAILED


async def _tools_call(name: str, args_json: str, config_path: str | Path | None) -> int:
    try:
        arguments = json.loads(args_json)
    except ValueError as exc:
        print(f"error: --args is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not isinstance(arguments, dict):
        print("error: --args must be a JSON object", file=sys.stderr)
        return EXIT_BAD_INPUT
    _, mcp, tools = _build(config_path)
    try:
        catalog = await tools.catalog()
        if name not in catalog:
            print(f"error: unknown tool {name!r}; known: {', '.join(sorted(catalog)) or 'none'}", file=sys.stderr)
            return EXIT_BAD_INPUT
        call_id = f"cli-{uuid.uuid4().hex[:12]}"
        # One key per invocation: a CLI call is one attempt. Pass idempotency_key in --args to repeat a write safely.
        result = await tools.run(
            ToolCallInput(name=name, arguments=json.dumps(arguments), call_id=call_id, idempotency_key=call_id)
        )
    finally:
        await mcp.aclose()
    if result.is_error:
        print(result.content, file=sys.stderr)
        return EXIT_FAILED
    value = result_value(result)
    print(result.content if value is result.content else json.dumps(value, indent=2, ensure_ascii=False))
    return EXIT_OK


def _type_of(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return "|".join(_type_of(s) for s in schema["anyOf"])
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    if "$ref" in schema:
        ref: str = schema["$ref"]
        return ref.rsplit("/", 1)[-1]
    kind = schema.get("type", "any")
    if kind == "array":
        return f"{_type_of(schema.get('items', {}))}[]"
    return kind if isinstance(kind, str) else "|".join(kind)


def _fields(schema: dict[str, Any] | None) -> str:
    if not schema:
        return "-"
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    if not props:
        return _type_of(schema)
    return ", ".join(f"{k}{'' if k in required else '?'}: {_type_of(v)}" for k, v in props.items())


_COLUMNS = ("TOOL", "SOURCE", "EFFECTS", "APPROVAL", "DELIVERY")


def _table(tools: list[ToolSchema]) -> str:
    """One row per tool: where it comes from, whether it writes, whether a person approves each call, and its
    delivery policy (``retry``: safe to repeat; ``key``: deduplicated by idempotency key; ``at_most_once``)."""
    rows = [_COLUMNS] + [
        (
            t.name,
            t.source,
            "writes" if t.side_effects else "read-only",
            "required" if t.requires_approval else "-",
            t.delivery,
        )
        for t in tools
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows) + "\n"


def _describe(tool: ToolSchema) -> str:
    kind = "writes" if tool.side_effects else "read-only"
    summary = (tool.description or "").strip().splitlines()[0] if tool.description else ""
    return (
        f"{tool.name}  [{tool.source}, {kind}]\n"
        f"    {summary}\n"
        f"    input:  {_fields(tool.parameters)}\n"
        f"    output: {_fields(tool.output_schema)}"
    )
