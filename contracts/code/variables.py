"""Variables as memory: what a session's REPL holds between turns, for stubs and prompts.

Pure: the workflow finds a program's top-level names (``module_names``), the
sandbox reports which exist and their types, and the next turn's type check
and prompt see them as declarations (``variable_stubs``, ``variables_note``),
names and types only, never values.
"""

from __future__ import annotations

import ast
import keyword

from .program import VariableInfo

_STUB_TYPES = {
    "list": "list[Any]",
    "dict": "dict[str, Any]",
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "NoneType": "None",
    "tuple": "tuple[Any, ...]",
    "set": "set[Any]",
}
_PRIVATE = "_agentsteps"


def module_names(program: str) -> list[str]:
    """Names a program binds at module level (assignments, loops, defs, imports), in order; [] if it does not parse."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return []
    found: dict[str, None] = {}

    def bind(target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            found.setdefault(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                bind(element)
        elif isinstance(target, ast.Starred):
            bind(target.value)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                bind(node.target)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                bind(node.target)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        bind(item.optional_vars)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(node.name, None)
                continue  # its body is another scope
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    found.setdefault((alias.asname or alias.name).split(".")[0], None)
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(node, field, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                visit(handler.body)

    visit(tree.body)
    return [n for n in found if n.isidentifier() and not keyword.iskeyword(n) and not n.startswith(_PRIVATE)]


def probe_program(names: list[str]) -> str:
    """A snippet whose value maps each name that exists in the REPL to ``[its type's name, len() or None]``."""
    lines = [f"def {_PRIVATE}_probe():", "    found = {}"]
    for name in names:
        lines += [
            "    try:",
            f"        found[{name!r}] = [type({name}).__name__, None]",
            "    except NameError:",
            "        pass",
        ]
        lines += ["    try:", f"        found[{name!r}][1] = len({name})", "    except Exception:", "        pass"]
    lines += ["    return found", f"{_PRIVATE}_probe()"]
    return "\n".join(lines) + "\n"


def variable_stubs(variables: list[VariableInfo]) -> str:
    """Declarations appended to the tool stubs, so a program may use earlier turns' variables."""
    if not variables:
        return ""
    lines = [f"{v.name}: {_STUB_TYPES.get(v.type, 'Any')}" for v in variables]
    return "\n\n# Variables kept from earlier turns of this session\n" + "\n".join(lines) + "\n"


def variables_note(variables: list[VariableInfo]) -> str:
    """What the model is told about the REPL at the start of a turn."""
    if not variables:
        return ""
    listed = ", ".join(f"{v.name}: {v.type}" for v in variables)
    return (
        "\n\n[Variables kept from earlier turns of this session, usable directly in your program "
        f"(name: type): {listed}]"
    )


__all__ = ["module_names", "probe_program", "variable_stubs", "variables_note"]
