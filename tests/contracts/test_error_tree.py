"""Every failure type a run can end with is one class in the exception tree,
drawn in ``contracts/errors.py``'s docstring and listed in README's table.

The types are found in the source, not in a hand-kept list: every
``ApplicationError(type=...)`` the package raises, whether the type is a
literal, ``SomeError.__name__``, ``type(error).__name__`` on an annotated
parameter (all of that class's subclasses), or a parameter forwarded by a
helper such as ``_fail(message, "InvalidSpecError")``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import agentsteps.contracts.mcp  # noqa: F401 - defines the McpError branch of the tree
from agentsteps.contracts import errors
from agentsteps.contracts.errors import AgentStepsError

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {"tests", "docs", "deploy", "__pycache__"}


def source_files() -> list[Path]:
    return sorted(
        p
        for p in ROOT.rglob("*.py")
        if not ({part for part in p.relative_to(ROOT).parts[:-1]} & SKIPPED_DIRS)
        and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
    )


def tree_classes() -> dict[str, type[AgentStepsError]]:
    found: dict[str, type[AgentStepsError]] = {}
    pending: list[type[AgentStepsError]] = [AgentStepsError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def leaves(cls: type[AgentStepsError]) -> set[str]:
    """A class raised by its runtime type stands for each concrete subclass."""
    subs = cls.__subclasses__()
    return {cls.__name__} if not subs else set().union(*(leaves(s) for s in subs))


@dataclass(frozen=True)
class Forwarder:
    """A function that passes one of its parameters on as ``ApplicationError``'s type."""

    name: str
    index: int
    param: str


def _is_application_error(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "ApplicationError") or (
        isinstance(f, ast.Attribute) and f.attr == "ApplicationError"
    )


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    return [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]


def _annotation_of(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> str | None:
    for a in _params(fn):
        if a.arg == name and a.annotation is not None:
            return ast.unparse(a.annotation).strip("'\"")
    return None


def raised_types() -> tuple[dict[str, set[str]], list[str]]:
    """Type name -> where it is raised, plus the type expressions this scan cannot read."""
    classes = tree_classes()
    found: dict[str, set[str]] = {}
    unreadable: list[str] = []
    forwarders: list[Forwarder] = []
    trees = {p: ast.parse(p.read_text(), str(p)) for p in source_files()}

    def add(name: str, where: str) -> None:
        found.setdefault(name, set()).add(where)

    for path, tree in trees.items():
        rel = str(path.relative_to(ROOT))
        # The innermost function around each call: its parameters say what a name is.
        enclosing: dict[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for fn in _functions(tree):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and _is_application_error(node):
                    enclosing[node] = fn
        for call, fn in enclosing.items():
            where = f"{rel}:{call.lineno}"
            expr = next((k.value for k in call.keywords if k.arg == "type"), None)
            params = _params(fn)
            if expr is None:
                continue
            if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                add(expr.value, where)
            elif isinstance(expr, ast.Attribute) and expr.attr == "__name__" and isinstance(expr.value, ast.Name):
                add(expr.value.id, where)
            elif (
                isinstance(expr, ast.Attribute)
                and expr.attr == "__name__"
                and isinstance(expr.value, ast.Call)
                and isinstance(expr.value.func, ast.Name)
                and expr.value.func.id == "type"
                and isinstance(expr.value.args[0], ast.Name)
                and _annotation_of(fn, expr.value.args[0].id) in classes
            ):
                for leaf in leaves(classes[_annotation_of(fn, expr.value.args[0].id)]):
                    add(leaf, where)
            elif isinstance(expr, ast.Name) and expr.id in [a.arg for a in params]:
                # Callers never pass ``self``/``cls`` positionally.
                names = [a.arg for a in params if a.arg not in ("self", "cls")]
                forwarders.append(Forwarder(fn.name, names.index(expr.id), expr.id))
            else:
                unreadable.append(f"{where}: type={ast.unparse(expr)}")

    for fw in forwarders:
        for path, tree in trees.items():
            rel = str(path.relative_to(ROOT))
            for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                f = call.func
                if not ((isinstance(f, ast.Name) and f.id == fw.name) or (isinstance(f, ast.Attribute) and f.attr == fw.name)):
                    continue
                arg = next((k.value for k in call.keywords if k.arg == fw.param), None)
                if arg is None and fw.index < len(call.args):
                    arg = call.args[fw.index]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    add(arg.value, f"{rel}:{call.lineno}")
                elif isinstance(arg, ast.Attribute) and arg.attr == "__name__" and isinstance(arg.value, ast.Name):
                    add(arg.value.id, f"{rel}:{call.lineno}")
                elif arg is not None:
                    unreadable.append(f"{rel}:{call.lineno}: {fw.name}({fw.param}={ast.unparse(arg)})")
    return found, unreadable


def docstring_tree() -> set[str]:
    """Class names drawn in the tree of ``contracts/errors.py``'s docstring (its indented lines)."""
    doc = errors.__doc__ or ""
    return set(re.findall(r"^ {4}[ │├└─]*([A-Z]\w+)\b", doc, re.MULTILINE))


def readme_failure_types() -> set[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Failure types", 1)[1]
    section = re.split(r"^#{1,3} ", section, maxsplit=1, flags=re.MULTILINE)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    first_cells = [row.split("|")[1] for row in rows[1:]]
    return {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}


def test_the_scan_finds_the_known_failure_types():
    found, _ = raised_types()
    # One of each way a type is written: literal, forwarded by a helper, and an McpError's class name.
    for name in ("ContractViolationError", "CompositionError", "McpUnavailableError", "SnapshotIntegrityError"):
        assert name in found, f"the scan no longer sees {name}; it has stopped reading how the code raises"


def test_every_type_expression_is_readable():
    _, unreadable = raised_types()
    assert unreadable == [], "name the type with a literal or SomeError.__name__:\n" + "\n".join(unreadable)


def test_every_raised_failure_type_is_a_class_in_the_tree():
    found, _ = raised_types()
    classes = tree_classes()
    missing = {name: sorted(where) for name, where in found.items() if name not in classes}
    assert missing == {}, f"failure types with no AgentStepsError class: {missing}"


def test_every_class_in_the_tree_is_drawn_in_the_errors_docstring():
    drawn = docstring_tree()
    assert set(tree_classes()) - drawn == set()
    assert drawn - set(tree_classes()) == set(), "the docstring draws classes that do not exist"


def test_every_raised_failure_type_is_in_the_readme_table():
    found, _ = raised_types()
    listed = readme_failure_types()
    missing = {name: sorted(where) for name, where in found.items() if name not in listed}
    assert missing == {}, f'failure types missing from README "### Failure types": {missing}'
