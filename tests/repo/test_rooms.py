"""The rooms of the package and the arrows between them, read from the imports.

Every ``import`` and ``from ... import`` in the package's source counts,
including the ones inside functions, ``TYPE_CHECKING`` blocks and a workflow's
``imports_passed_through()``: a lazy import is still an arrow. The table is
README's "Layout" table; an arrow it does not list fails here, naming the file.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest
from package_source import ROOT, package_files

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`


# room -> the other rooms it may import. A room missing here may import anything.
MAY_IMPORT: dict[str, set[str]] = {
    "contracts": set(),
    # failures/: the one seam between the exception tree and Temporal's ApplicationError.
    "failures": {"contracts"},
    "telemetry": {"contracts"},
    "storage": {"contracts", "failures"},
    "activities": {"contracts", "failures", "storage", "telemetry"},
    "workflows": {"contracts", "failures", "telemetry"},
    "client": {"contracts", "failures", "storage", "telemetry"},
    # console/: a client like the CLI (DESIGN rule 11): it never builds a worker or touches activities.
    "console": {"contracts", "client"},
}
# contracts/ is the pure typed core: no Temporal and no I/O library, in any form.
IO_LIBRARIES = {
    "temporalio",
    "httpx",
    "httpx2",
    "aiohttp",
    "openai",
    "anthropic",
    "mcp",
    "pydantic_monty",
    "prometheus_client",
    "opentelemetry",
    "aioboto3",
    "boto3",
    "socket",
    "subprocess",
    "asyncio",
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["agentsteps", *parts])


@functools.cache
def imports() -> dict[str, dict[str, int]]:
    """Module -> every module it imports (absolute), with the line of the first import; parsed once for all tests."""
    graph: dict[str, dict[str, int]] = {}
    for path in package_files():
        module = _module(path)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        found: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                    # ``from . import x`` names a module x when x is one.
                    names = [f"{target}.{a.name}" for a in node.names] if not node.module else []
                else:
                    target, names = node.module or "", []
                for t in [target, *names]:
                    found.setdefault(t, node.lineno)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    found.setdefault(alias.name, node.lineno)
        graph[module] = found
    return graph


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "agentsteps" and len(parts) > 1 else parts[0]


def _where(module: str, line: int) -> str:
    return f"{module.replace('agentsteps.', '', 1).replace('.', '/')}.py:{line}"


def test_each_room_imports_only_the_rooms_below_it():
    wrong = []
    for module, targets in imports().items():
        allowed = MAY_IMPORT.get(room(module))
        if allowed is None:
            continue
        for target, line in targets.items():
            if target.startswith("agentsteps.") and room(target) not in allowed | {room(module)}:
                wrong.append(f"{_where(module, line)} imports {target}")
    assert wrong == [], "an arrow the layout does not allow:\n" + "\n".join(wrong)


def test_contracts_import_no_temporal_and_no_io_library():
    wrong = [
        f"{_where(module, line)} imports {target}"
        for module, targets in imports().items()
        if room(module) == "contracts"
        for target, line in targets.items()
        if target.split(".")[0] in IO_LIBRARIES
    ]
    assert wrong == [], "contracts/ is pure:\n" + "\n".join(wrong)


def test_the_demos_do_not_borrow_from_the_cli():
    wrong = [
        f"{_where(module, line)} imports {target}"
        for module, targets in imports().items()
        if room(module) == "demos"
        for target, line in targets.items()
        if room(target) == "cli"
    ]
    assert wrong == [], "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _part(module: str, depth: int) -> str:
    """The node a module belongs to at ``depth``: ``agentsteps.contracts.llm.request`` -> ``contracts.llm``."""
    return ".".join(module.split(".")[1 : 1 + depth])


def test_no_two_rooms_import_each_other():
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports().items():
        for target in targets:
            if target.startswith("agentsteps.") and room(target) != room(module):
                graph[room(module)].add(room(target))
    assert _cycles(graph) == []


def test_no_two_parts_of_contracts_import_each_other():
    # A part is a subpackage (contracts/llm) or a module at the root (contracts/spec.py).
    graph: dict[str, set[str]] = defaultdict(set)
    modules = imports()
    for module, targets in modules.items():
        if room(module) != "contracts":
            continue
        for target in targets:
            if target in modules and room(target) == "contracts" and _part(target, 2) != _part(module, 2):
                graph[_part(module, 2)].add(_part(target, 2))
    assert _cycles(graph) == [], "contracts' parts import each other"


def test_no_module_imports_itself_round_a_circle():
    modules = imports()
    graph = {m: {t for t in targets if t in modules} for m, targets in modules.items()}
    # A package's __init__ re-exporting its own modules is not a circle the reader has to follow.
    for module in graph:
        graph[module] = {t for t in graph[module] if not module.startswith(t + ".")}
    assert _cycles(graph) == []


def test_activities_holds_packages_only():
    loose = [p.name for p in (ROOT / "activities").glob("*.py") if p.name != "__init__.py"]
    assert loose == [], (
        f"activities/ holds packages (llm, tools, mcp, sandbox, session, monitor, attempts), not loose files: {loose}"
    )


def test_every_folder_of_the_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {_module(p.parent / "__init__.py") for p in package_files()}
    missing = sorted(folders - listed)
    assert missing == [], f"pyproject.toml's package list misses {missing}: a wheel would ship without them"
