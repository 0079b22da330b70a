"""Python tools: typed functions with pydantic input and output models.

A tool is declared once with ``@registry.tool``; its input model gives the JSON
Schema the model sees and validates the arguments, its return annotation gives
the output schema. Tests and the CLI can enumerate the registry.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar, get_type_hints

from pydantic import BaseModel

from ...contracts import ToolSchema
from ...contracts.errors import ToolConfigError
from ...contracts.llm.tools import Delivery
from ...contracts.tool_names import tool_name_collisions

_Fn = TypeVar("_Fn", bound=Callable[..., Any])
"""A tool function; ``@registry.tool`` hands it back unchanged, so its type is kept."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool gets besides its arguments."""

    call_id: str
    idempotency_key: str
    """Stable across retries and crashes: a side-effecting tool dedupes on it."""


@dataclass(frozen=True)
class PythonTool:
    name: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel] | None
    fn: Callable[..., Any]
    side_effects: bool
    wants_context: bool
    requires_approval: bool = False
    delivery: Delivery = "retry"

    def schema(self) -> ToolSchema:
        # Generating JSON Schemas from the models costs milliseconds, and every
        # run starts with tools.describe: build it once per tool.
        return self._schema

    @cached_property
    def _schema(self) -> ToolSchema:
        return ToolSchema(
            name=self.name,
            description=self.description,
            parameters=self.input_model.model_json_schema(),
            output_schema=self.output_model.model_json_schema() if self.output_model else None,
            side_effects=self.side_effects,
            requires_approval=self.requires_approval,
            delivery=self.delivery,
            source="python",
        )

    async def invoke(self, args: BaseModel, ctx: ToolContext) -> Any:
        result = self.fn(args, ctx) if self.wants_context else self.fn(args)
        if inspect.isawaitable(result):
            result = await result
        return result


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, PythonTool] = {}

    def tool(
        self,
        name: str | None = None,
        *,
        side_effects: bool = False,
        delivery: Delivery | None = None,
        requires_approval: bool = False,
    ) -> Callable[[_Fn], _Fn]:
        """Register ``fn(args: InputModel[, ctx: ToolContext]) -> OutputModel``.

        ``delivery`` defaults to ``retry`` for a tool without side effects, ``key``
        for one that takes a ``ToolContext`` (it must dedupe on
        ``ctx.idempotency_key``) and ``at_most_once`` for one that does not.
        Declare ``retry`` for a side-effecting tool that is idempotent by nature.
        ``requires_approval``: every call waits for a person's ``approve`` (or is rejected).
        """

        def register(fn: _Fn) -> _Fn:
            tool = _describe(fn, name=name, side_effects=side_effects, delivery=delivery)
            self.add(dataclasses.replace(tool, requires_approval=requires_approval))
            return fn

        return register

    def add(self, tool: PythonTool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        ToolSchema.model_validate(tool.schema().model_dump())  # fail at start-up, not mid-run
        clashes = tool_name_collisions([*self._tools, tool.name])
        if clashes:
            raise ToolConfigError(clashes)
        self._tools[tool.name] = tool

    def get(self, name: str) -> PythonTool | None:
        return self._tools.get(name)

    def schemas(self) -> dict[str, ToolSchema]:
        return {name: tool.schema() for name, tool in self._tools.items()}

    def __iter__(self) -> Iterator[PythonTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def _describe(
    fn: Callable[..., Any], *, name: str | None, side_effects: bool, delivery: Delivery | None = None
) -> PythonTool:
    params = list(inspect.signature(fn).parameters.values())
    hints = get_type_hints(fn)
    if not params or len(params) > 2:
        raise TypeError(f"tool {fn.__name__}: expected fn(args: Model) or fn(args: Model, ctx: ToolContext)")
    input_model = hints.get(params[0].name)
    if not (inspect.isclass(input_model) and issubclass(input_model, BaseModel)):
        raise TypeError(f"tool {fn.__name__}: the first parameter must be annotated with a pydantic model")
    output = hints.get("return")
    output_model = output if inspect.isclass(output) and issubclass(output, BaseModel) else None
    wants_context = len(params) == 2
    if delivery is None:
        delivery = "retry" if not side_effects else "key" if wants_context else "at_most_once"
    if delivery not in ("retry", "key", "at_most_once"):
        raise TypeError(f"tool {fn.__name__}: delivery must be retry, key or at_most_once, not {delivery!r}")
    if delivery == "key" and not wants_context:
        raise TypeError(f"tool {fn.__name__}: delivery 'key' needs a ctx: ToolContext parameter to read the key from")
    return PythonTool(
        name=name or fn.__name__,
        description=inspect.getdoc(fn) or "",
        input_model=input_model,
        output_model=output_model,
        fn=fn,
        side_effects=side_effects,
        wants_context=wants_context,
        delivery=delivery,
    )
