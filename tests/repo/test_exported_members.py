"""The public API is one list, and everything that names it agrees with it.

The list: ``agentsteps.PUBLIC_MODULES``, and in each of those modules the names of its
``__all__`` (as encode/httpx's ``tests/test_exported_members.py`` holds httpx's ``__all__``).
Held here:

- every exported name exists, and a class or function reports a module inside the public one
  (defined there, or in that package's own submodules): nothing internal is exported as public;
- a public package exports every class and function of agentsteps' own that it imports, so
  nothing is reachable from it by accident;
- ``docs/api.md``'s table lists the same modules and, for each, the same names;
- every ``agentsteps`` import in the README's and the docs' code blocks, and every dotted name
  they point a reader at, is public.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import agentsteps
from agentsteps.contracts.config.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The examples are programs and configuration values (`python -m agentsteps.examples.tickets`, a
# `tool_factories` entry), not an API to import: docs/api.md lists them as internal.
NOT_AN_IMPORT = "agentsteps.examples"


def _public() -> dict[str, ModuleType]:
    return {name: importlib.import_module(name) for name in agentsteps.PUBLIC_MODULES}


def _owned_by(defined_in: str, module: ModuleType) -> bool:
    home = module.__name__
    is_package = hasattr(module, "__path__")
    return defined_in == home or (is_package and defined_in.startswith(home + "."))


@pytest.mark.parametrize("name", agentsteps.PUBLIC_MODULES)
def test_every_exported_name_exists_and_reports_its_public_module(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} is public but has no __all__"
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    elsewhere = {
        n: obj.__module__
        for n in exported
        if (inspect.isclass(obj := getattr(module, n)) or inspect.isfunction(obj))
        and not _owned_by(obj.__module__, module)
    }
    assert not elsewhere, f"{name} exports names defined outside it (make them public there, or move them): {elsewhere}"


def test_a_public_package_exports_every_name_of_ours_it_imports():
    leaks = {}
    for name, module in _public().items():
        if not hasattr(module, "__path__"):
            continue  # a module defines helpers of its own; a package's __init__ only gathers
        unexported = sorted(
            n
            for n, obj in vars(module).items()
            if not n.startswith("_")
            and n not in module.__all__
            and (inspect.isclass(obj) or inspect.isfunction(obj))
            and obj.__module__.startswith("agentsteps.")
        )
        if unexported:
            leaks[name] = unexported
    assert not leaks, f"public packages that import names of ours without exporting them: {leaks}"


def _api_table() -> dict[str, list[str]]:
    rows = re.findall(r"^\| `(agentsteps(?:\.\w+)*)` \|[^|]*\| (.*) \|$", (ROOT / "docs" / "api.md").read_text(), re.M)
    return {module: re.findall(r"`(\w+)`", names) for module, names in rows}


def test_docs_api_lists_every_public_module_and_name_and_nothing_else():
    table = _api_table()
    assert sorted(table) == sorted(agentsteps.PUBLIC_MODULES)
    for name, module in _public().items():
        listed = table[name]
        assert len(listed) == len(set(listed)), f"docs/api.md lists a name of {name} twice"
        assert set(listed) == set(module.__all__), (
            f"{name}: docs/api.md lists {sorted(set(listed) - set(module.__all__))} that __all__ lacks, "
            f"and lacks {sorted(set(module.__all__) - set(listed))}"
        )


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def _imports(page: Path) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each ``from agentsteps... import name``; ``(module, None)`` for ``import``."""
    found: list[tuple[str, str | None]] = []
    for block in _python_blocks(page.read_text()):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agentsteps":
                found += [(node.module or "", alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "agentsteps"]
    return found


def _is_public(module: str, name: str | None, public: dict[str, ModuleType]) -> bool:
    if module.startswith(NOT_AN_IMPORT):
        return True
    if name is None:
        return module in public
    return module in public and name in public[module].__all__


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.name)
def test_every_import_the_docs_show_is_public(page):
    public = _public()
    private = [
        f"from {m} import {n}" if n else f"import {m}" for m, n in _imports(page) if not _is_public(m, n, public)
    ]
    assert not private, f"{page.name} imports what the public list lacks: {private}"


def _package_entries() -> set[str]:
    return {p.stem for p in ROOT.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.name)
def test_every_dotted_name_the_docs_point_at_is_public(page):
    """A backticked ``agentsteps.x.y`` names a public module, or a public name of one. ``agentsteps.toml``
    and the like are files, not modules: only paths into the package count."""
    public, entries = _public(), _package_entries() | set(agentsteps.__all__)
    private = []
    for path in re.findall(r"`(agentsteps(?:\.\w+)+)", page.read_text()):
        if path.split(".")[1] not in entries or path.startswith(NOT_AN_IMPORT):
            continue
        module, _, name = path.rpartition(".")
        if path not in public and not (module in public and name in public[module].__all__):
            private.append(path)
    assert not private, f"{page.name} points at names the public list lacks: {private}"


def test_the_data_converter_has_one_home_and_it_is_public(tmp_path):
    """The README and docs/deployment.md send clients to it: one definition, in a public module."""
    from agentsteps import worker
    from agentsteps.storage import payload_store

    assert "build_data_converter" in worker.__all__
    assert worker.build_data_converter.__module__ == "agentsteps.worker"
    # Where 0.2.0's README sent clients: still working for a minor version, with a warning that names the home.
    with pytest.warns(DeprecationWarning, match="use agentsteps.worker.build_data_converter"):
        payload_store.build_data_converter(WorkerSettings(state_dir=tmp_path))
