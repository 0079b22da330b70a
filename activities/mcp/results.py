"""MCP tool listings and call results, turned into the project's typed tool values.

- A listed tool becomes a ``ToolSchema`` (output schema included, ``source``
  = ``mcp:<server>``). Tools with an invalid name or schema are left out and
  logged, so one odd tool cannot break discovery of the rest.
- A result prefers ``structured_content``; a tool with an output schema must
  produce a value that validates, else the model gets a ``tool_output_invalid``
  violation as an error result. Text content is the fallback, parsed as JSON
  when it is JSON.
- Non-text content (resource links, images, audio, embedded resources) is
  described for the model and given to programs as typed values
  (``content.py``), annotations included.
- Tools that require task augmentation (``execution.taskSupport:
  "required"``) are not offered: plain calls to them always fail. A warning
  names each one.
- Any resolved secret value the server echoes back is redacted.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jsonschema import SchemaError
from jsonschema import exceptions as jsonschema_exceptions
from jsonschema.validators import validator_for

from ...contracts.llm.tools import TOOL_NAME_PATTERN, Delivery, ToolCallResult, ToolSchema
from ...contracts.mcp import IDEMPOTENCY_ARGUMENT, mcp_source
from ...contracts.violations import Violation, ViolationKind
from .content import block_text, block_value, only_text

if TYPE_CHECKING:  # the SDK loads with the pool's first connection (sdk.py)
    import mcp_types as types

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
_NAME = re.compile(TOOL_NAME_PATTERN)


def scrub(value: Any, secrets: list[str]) -> Any:
    """``value`` with every secret string replaced, at any depth."""
    secrets = [s for s in secrets if len(s) >= 4]
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    return value


def _valid_schema(schema: dict[str, Any]) -> bool:
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError:
        return False
    return True


def model_parameters(input_schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments schema the model sees: without the ``idempotency_key``, which the engine owns.

    A model that chose a key (``reminder-001``) would make the server dedupe two different runs'
    effects, the second getting the first one's result; so the model is never offered one, and
    whatever it sends is replaced (``with_engine_key``).
    """
    schema = copy.deepcopy(input_schema) or {"type": "object", "properties": {}}
    properties = schema.get("properties")
    if isinstance(properties, dict) and IDEMPOTENCY_ARGUMENT in properties:
        del properties[IDEMPOTENCY_ARGUMENT]
        required = [r for r in schema.get("required", []) if r != IDEMPOTENCY_ARGUMENT]
        if required:
            schema["required"] = required
        else:
            schema.pop("required", None)
    return schema


def delivery_of(tool: types.Tool, override: Delivery | None = None) -> Delivery:
    """``retry`` for read-only or idempotent tools (MCP annotations), ``key`` for tools that take
    an ``idempotency_key``, ``at_most_once`` for the rest; the server's config may override it."""
    if override is not None:
        return override
    annotations = tool.annotations
    if annotations is not None and (annotations.read_only_hint or annotations.idempotent_hint):
        return "retry"
    properties = (tool.input_schema or {}).get("properties") or {}
    return "key" if IDEMPOTENCY_ARGUMENT in properties else "at_most_once"


def to_tool_schema(
    server: str,
    prefix: str,
    tool: types.Tool,
    delivery: Delivery | None = None,
    require_approval: Sequence[str] = (),
) -> ToolSchema | None:
    name = prefix + tool.name
    if not _NAME.match(name):
        log.warning("mcp server %r: tool %r left out: name does not match %s", server, tool.name, TOOL_NAME_PATTERN)
        return None
    execution = tool.execution
    if execution is not None and execution.task_support == "required":
        log.warning(
            "mcp server %r: tool %r left out: it requires task augmentation (taskSupport: required), "
            "which this client does not offer",
            server,
            tool.name,
        )
        return None
    input_schema = dict(tool.input_schema or {})
    if not _valid_schema(input_schema) or (tool.output_schema is not None and not _valid_schema(tool.output_schema)):
        log.warning("mcp server %r: tool %r left out: invalid JSON Schema", server, tool.name)
        return None
    annotations = tool.annotations
    read_only = bool(annotations and annotations.read_only_hint)
    return ToolSchema(
        name=name,
        description=tool.description or tool.title or "",
        parameters=model_parameters(input_schema),
        output_schema=tool.output_schema,
        side_effects=not read_only,
        requires_approval=tool.name in require_approval,
        delivery=delivery_of(tool, delivery),
        source=mcp_source(server),
    )


def with_engine_key(tool: types.Tool, arguments: dict[str, Any], key: str) -> dict[str, Any]:
    """``arguments`` with the tool's ``idempotency_key`` set to the engine's key, whatever the caller put
    there (``ToolCallInput.idempotency_key``: per effect of this run, or of the run's ``key_scope``)."""
    properties = (tool.input_schema or {}).get("properties") or {}
    if IDEMPOTENCY_ARGUMENT in properties:
        return {**arguments, IDEMPOTENCY_ARGUMENT: key}
    return arguments


def _as_json(text: str) -> tuple[bool, Any]:
    stripped = text.strip()
    if not stripped or stripped[0] not in '[{"-0123456789tfn':
        return False, None
    try:
        return True, json.loads(stripped)
    except ValueError:
        return False, None


def output_violation(name: str, schema: dict[str, Any], value: Any) -> Violation | None:
    error = jsonschema_exceptions.best_match(validator_for(schema)(schema).iter_errors(value))
    if error is None:
        return None
    path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return Violation(
        contract=f"tool.{name}",
        phase="post",
        kind=ViolationKind.tool_output_invalid,
        path=path,
        message=f"the tool's result does not match its output schema: {error.message[:400]}",
    )


def to_tool_result(
    call_id: str, name: str, result: types.CallToolResult, output_schema: dict[str, Any] | None, secrets: list[str]
) -> ToolCallResult:
    blocks = list(result.content or [])
    plain = only_text(blocks)
    text = "\n".join(block_text(block, annotate_text=not plain or len(blocks) > 1) for block in blocks)
    if result.is_error:
        message = text or (json.dumps(result.structured_content) if result.structured_content is not None else "")
        return ToolCallResult(
            call_id=call_id,
            name=name,
            is_error=True,
            content=scrub(message or "the tool reported an error without a message", secrets),
        )

    has_structured = result.structured_content is not None
    value: Any = result.structured_content
    if not has_structured and plain:
        has_structured, value = _as_json(text)

    if output_schema is not None:
        violation: Violation | None
        if not has_structured:
            violation = Violation(
                contract=f"tool.{name}",
                phase="post",
                kind=ViolationKind.tool_output_invalid,
                path="$",
                message="the tool declares an output schema but returned no structured (JSON) result",
            )
        else:
            violation = output_violation(name, output_schema, value)
        if violation is not None:
            return ToolCallResult(
                call_id=call_id, name=name, is_error=True, content=scrub(violation.for_model(), secrets)
            )

    if has_structured:
        value = scrub(value, secrets)
        return ToolCallResult(
            call_id=call_id, name=name, content=json.dumps(value, ensure_ascii=False), structured=value
        )
    if not plain:
        # Programs get typed blocks; the model reads their descriptions.
        return ToolCallResult(
            call_id=call_id,
            name=name,
            content=scrub(text, secrets),
            structured=scrub([block_value(b) for b in blocks], secrets),
        )
    return ToolCallResult(call_id=call_id, name=name, content=scrub(text, secrets))
