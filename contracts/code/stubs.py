"""The model's side of code mode: the typed stub module it writes a program
against, the Python names tools get there, and reading the program back out
of its reply.
"""

from __future__ import annotations

import builtins
import json
import keyword
import re
from typing import Any

from ..llm.tools import ToolSchema
from .program import LLM_FUNCTION, ProgramFunction

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_program(text: str | None) -> str | None:
    """The program in a model's reply: the first fenced block, else nothing."""
    if not text:
        return None
    match = _FENCE.search(text)
    return match.group(1).strip("\n") + "\n" if match else None


def python_name(tool_name: str) -> str:
    """A tool name as a Python identifier the program can call."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", tool_name)
    if not name or name[0].isdigit():
        name = "_" + name
    # A builtin of the same name would shadow the tool, since the sandbox only
    # asks the host for names it cannot resolve itself.
    if keyword.iskeyword(name) or hasattr(builtins, name) or name == LLM_FUNCTION:
        name += "_"
    return name


def _ordered_params(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    usable = [
        (k, v if isinstance(v, dict) else {}) for k, v in props.items() if k.isidentifier() and not keyword.iskeyword(k)
    ]
    # Python wants parameters with defaults last; the order here is also the
    # order positional arguments are named in, so it is computed once.
    return [(k, v, True) for k, v in usable if k in required] + [(k, v, False) for k, v in usable if k not in required]


def program_functions(tools: list[ToolSchema]) -> list[ProgramFunction]:
    funcs = []
    for t in tools:
        ordered = _ordered_params(t.parameters)
        funcs.append(
            ProgramFunction(
                python_name=python_name(t.name),
                tool=t.name,
                params=[p for p, _, _ in ordered],
                required=[p for p, _, req in ordered if req],
                long_wait=t.requires_approval,
            )
        )
    funcs.append(
        ProgramFunction(python_name=LLM_FUNCTION, tool=LLM_FUNCTION, params=["prompt", "schema"], required=["prompt"])
    )
    return funcs


def _pascal(name: str) -> str:
    parts = re.split(r"[^A-Za-z0-9]+", name)
    out = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return out if out and not out[0].isdigit() else "T" + out


class _StubWriter:
    def __init__(self) -> None:
        self.classes: list[str] = []
        self._names: set[str] = set()
        self.root: dict[str, Any] = {}
        self._refs: dict[tuple[int, str], str] = {}

    def unique(self, name: str) -> str:
        candidate, n = name, 2
        while candidate in self._names:
            candidate, n = f"{name}{n}", n + 1
        self._names.add(candidate)
        return candidate

    def type_of(self, schema: Any, hint: str) -> str:
        if not isinstance(schema, dict) or not schema:
            return "Any"
        if isinstance(schema.get("$ref"), str):
            return self._ref(schema["$ref"])
        if "const" in schema:
            return f"Literal[{json.dumps(schema['const'])}]"
        if "enum" in schema and all(isinstance(v, (str, int, bool)) for v in schema["enum"]):
            return (
                "Literal["
                + ", ".join(json.dumps(v) if not isinstance(v, bool) else str(v) for v in schema["enum"])
                + "]"
            )
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                return self._union([self.type_of(s, hint) for s in schema[key]])
        kind = schema.get("type")
        if isinstance(kind, list):
            return self._union([self.type_of({**schema, "type": k}, hint) for k in kind])
        if kind == "string":
            return "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "float"
        if kind == "boolean":
            return "bool"
        if kind == "null":
            return "None"
        if kind == "array":
            return f"list[{self.type_of(schema.get('items'), hint + 'Item')}]"
        if kind == "object" or "properties" in schema:
            if schema.get("properties"):
                return self.typed_dict(schema, hint)
            return "dict[str, Any]"
        return "Any"

    def _ref(self, ref: str) -> str:
        # Local definitions only (pydantic's ``#/$defs/Name``); anything else is Any.
        prefix = "#/$defs/"
        target = (self.root.get("$defs") or {}).get(ref[len(prefix) :]) if ref.startswith(prefix) else None
        if not isinstance(target, dict):
            return "Any"
        key = (id(self.root), ref)
        if key not in self._refs:
            self._refs[key] = "Any"  # a recursive reference stays Any rather than looping
            self._refs[key] = self.type_of(target, ref[len(prefix) :])
        return self._refs[key]

    @staticmethod
    def _union(parts: list[str]) -> str:
        unique = list(dict.fromkeys(parts))
        return "Any" if "Any" in unique else " | ".join(unique)

    def typed_dict(self, schema: dict[str, Any], hint: str) -> str:
        name = self.unique(_pascal(hint))
        required = set(schema.get("required") or [])
        fields = []
        for key, sub in schema["properties"].items():
            t = self.type_of(sub, hint + _pascal(key))
            fields.append((key, t if key in required else f"NotRequired[{t}]"))
        if all(k.isidentifier() and not keyword.iskeyword(k) for k, _ in fields):
            body = "\n".join(f"    {k}: {t}" for k, t in fields) or "    pass"
            self.classes.append(f"class {name}(TypedDict):\n{body}\n")
        else:
            items = ", ".join(f"{json.dumps(k)}: {t}" for k, t in fields)
            self.classes.append(f"{name} = TypedDict({json.dumps(name)}, {{{items}}})\n")
        return name


def generate_stubs(tools: list[ToolSchema]) -> str:
    """A Python stub module for the tools: one ``async def`` per tool, arguments
    from its input schema, a ``TypedDict`` return from its output schema, or
    ``Any`` when it has none. Ends with the ``llm`` function."""
    writer = _StubWriter()
    functions: list[str] = []
    for tool in tools:
        fname = python_name(tool.name)
        params = []
        writer.root = tool.parameters
        for pname, pschema, required in _ordered_params(tool.parameters):
            ptype = writer.type_of(pschema, f"{fname}_{pname}")
            params.append(f"{pname}: {ptype}" if required else f"{pname}: {ptype} | None = None")
        writer.root = tool.output_schema or {}
        returns = writer.type_of(tool.output_schema, f"{fname}_result") if tool.output_schema else "Any"
        doc = (tool.description or f"The {tool.name} tool.").strip().replace('"""', "'''")
        functions.append(
            f"async def {fname}({', '.join(params)}) -> {returns}:\n"
            f'    """{doc}\n\n    A failure raises RuntimeError with the tool\'s message."""\n'
            f"    ...\n"
        )
    functions.append(
        f"async def {LLM_FUNCTION}(prompt: str, schema: dict[str, Any] | None = None) -> Any:\n"
        '    """Ask a language model. With a JSON Schema the answer is parsed JSON that\n'
        '    validates against it; without one it is text."""\n'
        "    ...\n"
    )
    header = "from typing import Any, Literal, NotRequired, TypedDict\n"
    return "\n\n".join([header, *writer.classes, *functions])
