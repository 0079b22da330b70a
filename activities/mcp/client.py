"""The MCP tool client: discovery and calls over pooled sessions.

Used by the ``mcp.*`` activities and by ``agentsteps tools``, so operators
exercise exactly the code path workers run. It never retries: an
infrastructure failure drops the session and raises ``McpUnavailableError``,
and Temporal's retry (with the same idempotency key) reconnects.

A call asks the server for progress notifications; inside an activity each
one is a heartbeat whose details carry the progress, so a long tool call
that reports progress outlives a short heartbeat timeout, and its progress
is visible on the pending activity.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import TYPE_CHECKING

from temporalio import activity

from ...contracts.llm.arguments import parse_tool_arguments
from ...contracts.llm.tools import ToolCallInput, ToolCallResult, ToolSchema, outcome_unknown, tool_removed
from ...contracts.mcp import McpAuthError, McpConfigError, McpUnavailableError
from ...contracts.violations import Violation, ViolationKind
from .errors import is_request_rejection, translate
from .pool import McpConnection, McpSessionPool
from .results import scrub, to_tool_result, to_tool_schema, with_engine_key

if TYPE_CHECKING:  # the SDK loads with the pool's first connection (sdk.py), before any call here uses it
    import mcp_types as types
    from mcp.shared.dispatcher import ProgressFnT

_TIMEOUT_SLACK_SECONDS = 2.0
"""The SDK enforces the call timeout; this outer bound only catches a wedged transport."""


def _error_result(call: ToolCallInput, message: str) -> ToolCallResult:
    return ToolCallResult(call_id=call.call_id, name=call.name, content=message, is_error=True)


def _arguments_violation(call: ToolCallInput, message: str) -> ToolCallResult:
    violation = Violation(
        contract=f"tool.{call.name}",
        phase="post",
        kind=ViolationKind.tool_arguments_not_json,
        path="$.arguments",
        message=message,
    )
    return _error_result(call, violation.for_model())


def _progress_heartbeat(call: ToolCallInput, secrets: list[str]) -> ProgressFnT:
    # The SDK calls back from the session's reader task, outside the activity's
    # context: capture that context here, in the activity's own task.
    context = contextvars.copy_context()
    in_activity = context.run(activity.in_activity)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if in_activity:
            details = {
                "tool": call.name,
                "progress": progress,
                "total": total,
                "message": scrub(message, secrets) if message else None,
            }
            context.run(activity.heartbeat, details)

    return on_progress


class McpToolClient:
    def __init__(self, pool: McpSessionPool) -> None:
        self.pool = pool

    @property
    def servers(self) -> list[str]:
        return sorted(self.pool.config.servers)

    async def aclose(self) -> None:
        await self.pool.aclose()

    async def _list(self, connection: McpConnection) -> list[types.Tool]:
        timeout = connection.config.timeouts.list_seconds
        try:
            return await asyncio.wait_for(connection.list_all_tools(), timeout=timeout)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            error = translate(
                exc,
                server=connection.server,
                http_status=connection.http_status,
                during="tools/list",
                secrets=connection.secrets,
            )
            if isinstance(error, McpUnavailableError):
                await self.pool.discard(connection)
            raise error from None

    async def list_tools(self, server: str | None = None) -> list[ToolSchema]:
        """Every tool of ``server`` (or of all servers) as ``ToolSchema``; names must be unique."""
        names = [server] if server is not None else self.servers
        schemas: list[ToolSchema] = []
        owner: dict[str, str] = {}
        for name in names:
            config = self.pool.server_config(name)
            connection = await self.pool.connection(name)
            for tool in await self._list(connection):
                schema = to_tool_schema(
                    name, config.tool_prefix, tool, config.delivery.get(tool.name), config.require_approval
                )
                if schema is None:
                    continue
                if schema.name in owner:
                    raise McpConfigError(
                        f"tool {schema.name!r} is offered by servers {owner[schema.name]!r} and {name!r}; "
                        "set tool_prefix on one of them"
                    )
                owner[schema.name] = name
                schemas.append(schema)
        return schemas

    async def call_tool(self, server: str, call: ToolCallInput) -> ToolCallResult:
        config = self.pool.server_config(server)
        if not call.name.startswith(config.tool_prefix):
            return _error_result(call, f"unknown tool {call.name!r} for server {server!r}")
        mcp_name = call.name[len(config.tool_prefix) :]
        arguments, problem = parse_tool_arguments(call.arguments)
        if arguments is None:
            return _arguments_violation(call, f"arguments are not usable: {problem}")

        connection = await self.pool.connection(server)
        tool = connection.tools.get(mcp_name)
        if tool is None:
            # The server may have added it since we connected.
            await self._list(connection)
            tool = connection.tools.get(mcp_name)
        if tool is None:
            offered = [config.tool_prefix + n for n in sorted(connection.tools)]
            return tool_removed(call, server, offered)
        if tool.execution is not None and tool.execution.task_support == "required":
            return _error_result(
                call,
                f"tool {call.name!r} requires task augmentation, which this client does not offer; it is not available",
            )
        arguments = with_engine_key(tool, arguments, call.idempotency_key)

        import mcp_types as types

        timeout = config.timeouts.call_seconds
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=mcp_name, arguments=arguments))
        try:
            # send_request, not session.call_tool: the SDK's own output-schema check raises a bare
            # RuntimeError, while a mismatch here must become a violation the model can read.
            result = await asyncio.wait_for(
                connection.client.session.send_request(
                    request,
                    types.CallToolResult,
                    request_read_timeout_seconds=timeout,
                    progress_callback=_progress_heartbeat(call, connection.secrets),
                ),
                timeout=timeout + _TIMEOUT_SLACK_SECONDS,
            )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if is_request_rejection(exc, connection.http_status):
                message = getattr(exc, "message", str(exc))
                return _error_result(call, scrub(f"the server rejected the call: {message}", connection.secrets))
            error = translate(
                exc,
                server=server,
                http_status=connection.http_status,
                during=f"tools/call {mcp_name}",
                secrets=connection.secrets,
            )
            if isinstance(error, McpUnavailableError):
                await self.pool.discard(connection)
            if call.delivery == "at_most_once" and not isinstance(error, McpAuthError):
                # The request may have reached the server: raising would let it be sent again.
                return outcome_unknown(call, str(error))
            raise error from None
        return to_tool_result(call.call_id, call.name, result, tool.output_schema, connection.secrets)
