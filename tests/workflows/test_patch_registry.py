"""Every ``workflow.patched`` id is in the registry, and the registry says true things about it.

``workflows/releases/registry.py`` is what a maintainer reads before retiring a
patch. These checks keep it whole against the code (every id the product asks,
found by reading the source, is registered, and every registered id is asked),
against ``contracts/names.py`` (its patch section is the registry's ids, and no
id ever changes) and against ``tests/histories/`` (the histories it says carry
an id's marker are exactly those that do). That each ``old_branch`` history
really replays the old branch is proven by replaying them
(``test_replay_histories.py``).
"""

from __future__ import annotations

import ast
import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsteps.contracts import names
from agentsteps.workflows.releases.registry import PATCHES

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = ROOT / "tests" / "histories"
NOT_PRODUCT = {"tests", "bench", ".venv", "build", "dist"}
ASKING = {"patched", "deprecate_patch"}

PERSISTED = {
    "EFFECTS_PATCH": "agentsteps.effects-once.1",
    "EXACTLY_ONCE_PATCH": "agentsteps.exactly-once.2",
    "REFUSAL_REPROMPTED_ONCE": "refusal-reprompted-once",
    "APPROVALS_PATCH": "approvals-v1",
    "APPROVALS_CARRIED_PATCH": "approvals-carried-v1",
    "TOKEN_STREAM_PATCH": "token-stream-v1",
    "PATCH_TOOL_RESULT_CAP": "tool-result-cap",
    "CONVERSATION_REF_PATCH": "agentsteps.conversation-by-ref.1",
    "SESSION_STATE_PATCH": "agentsteps.session-state.1",
    "RELEASE_PATCH": "agentsteps.release.2026-12",
    "SEARCH_ATTRIBUTES_PATCH": "agentsteps.search-attributes.1",
    "APPROVAL_NOTIFY_PATCH": "agentsteps.approval-notify.1",
    "QUOTA_FROM_WORKER_PATCH": "agentsteps.quota-from-worker.1",
    "CODE_CALL_CARRIES_PROGRAM_PATCH": "agentsteps.code-call-carries-program.1",
    "RELEASE_2026_12_06_PATCH": "agentsteps.release.2026-12-06",
}
"""Written out once, here only: recorded runs carry these strings, so none may ever change."""


# ---------------------------------------------------------------- reading the product's source


def _product_sources() -> Iterator[tuple[str, str]]:
    for top in sorted(ROOT.iterdir()):
        if top.name in NOT_PRODUCT or top.name.startswith("."):
            continue
        for path in [top] if top.suffix == ".py" else sorted(top.rglob("*.py")) if top.is_dir() else []:
            yield str(path.relative_to(ROOT)), path.read_text()


def _called(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def asked_ids(sources: list[tuple[str, str]], constants: dict[str, str]) -> tuple[set[str], list[str]]:
    """The patch ids ``sources`` ask ``workflow.patched``/``deprecate_patch``, directly or through helpers
    that hand on a parameter (``Features._ask(TOKEN_STREAM_PATCH)``); and every argument that is neither a
    known id constant nor such a parameter (a retyped string, a computed id), as ``file:line``."""
    askers = set(ASKING)
    trees: dict[str, ast.Module] = {}
    # Functions that pass one of their parameters to an asker are askers too (to a fixed point). A call to an
    # asker names it, so only files whose text does are read.
    while True:
        for name, text in sources:
            if name not in trees and any(asker in text for asker in askers):
                trees[name] = ast.parse(text)
        found = set(askers)
        for tree in trees.values():
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                params = _parameters(function)
                for call in ast.walk(function):
                    if isinstance(call, ast.Call) and _called(call) in askers and call.args:
                        first = call.args[0]
                        if isinstance(first, ast.Name) and first.id in params:
                            found.add(function.name)
        if found == askers:
            break
        askers = found
    ids: set[str] = set()
    unknown: list[str] = []
    for name, tree in trees.items():
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and _called(call) in askers and call.args):
                continue
            first = call.args[0]
            if isinstance(first, ast.Name) and first.id in constants:
                ids.add(constants[first.id])
                continue
            if not (isinstance(first, ast.Name) and first.id in _parameters(_enclosing(call, parents))):
                unknown.append(f"{name}:{call.lineno}")
    return ids, unknown


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    scope = parents.get(node)
    while scope is not None and not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        scope = parents.get(scope)
    return scope


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> set[str]:
    return {a.arg for a in function.args.args + function.args.kwonlyargs} if function is not None else set()


def _patch_constants() -> dict[str, str]:
    """The constants of ``contracts/names.py``'s ``workflow.patched ids`` section, by name."""
    source = (ROOT / "contracts" / "names.py").read_text()
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# ----") and "workflow.patched ids" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("# ----"))
    return {
        node.targets[0].id: node.value.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and start < node.lineno <= end
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }


# ---------------------------------------------------------------- reading the recorded histories


def _marked_ids(path: Path) -> set[str]:
    ids = set()
    for event in json.loads(path.read_text())["events"]:
        marker = event.get("markerRecordedEventAttributes")
        if marker is not None and marker["markerName"] == "core_patch":
            data = marker["details"]["patch-data"]["payloads"][0]["data"]
            ids.add(json.loads(base64.b64decode(data))["id"])
    return ids


MARKERS = {path.stem: _marked_ids(path) for path in sorted(HISTORIES.glob("*.json"))}


# ---------------------------------------------------------------- the checks


def test_the_registry_holds_every_patch_id_of_contracts_names_once():
    registered = [patch.id for patch in PATCHES]
    assert len(registered) == len(set(registered))
    assert sorted(registered) == sorted(_patch_constants().values())


def test_no_patch_id_ever_changes():
    assert _patch_constants() == PERSISTED
    assert {name: getattr(names, name) for name in PERSISTED} == PERSISTED


def test_every_id_the_product_asks_is_registered_and_every_registered_id_is_asked():
    ids, unknown = asked_ids(list(_product_sources()), _patch_constants())
    assert unknown == [], "ask a patch by its contracts/names.py constant, never a retyped or computed id"
    assert ids == {patch.id for patch in PATCHES}


def test_the_scan_sees_an_unregistered_id_asked_directly_or_through_a_helper():
    source = """
from temporalio import workflow

def since(patch_id):
    return workflow.patched(patch_id)

class Gate:
    def ask(self, patch_id):
        return since(patch_id)

def run(gate):
    workflow.deprecate_patch(OLD)
    return gate.ask(NEW) and workflow.patched("retyped")
"""
    ids, unknown = asked_ids([("example.py", source)], {"OLD": "old-1", "NEW": "new-1"})
    assert ids == {"old-1", "new-1"} and unknown == ["example.py:13"]


def test_the_histories_said_to_carry_a_marker_are_exactly_those_that_do():
    for patch in PATCHES:
        carrying = {stem for stem, ids in MARKERS.items() if patch.id in ids}
        assert set(patch.marked) == carrying, patch.id
    registered = {patch.id for patch in PATCHES}
    assert {i for ids in MARKERS.values() for i in ids} <= registered


def test_a_history_said_to_replay_an_old_branch_predates_the_id():
    for patch in PATCHES:
        assert len(set(patch.old_branch)) == len(patch.old_branch), patch.id
        for stem in patch.old_branch:
            assert stem in MARKERS, f"{patch.id}: no tests/histories/{stem}.json"
            assert patch.id not in MARKERS[stem], f"{patch.id}: {stem} carries its marker"
            for release in patch.under:
                assert release not in MARKERS[stem], f"{patch.id}: {stem} took the release {release}"


def test_every_patch_says_what_added_it_what_its_old_branch_does_and_when_it_may_go():
    for patch in PATCHES:
        assert "commit " in patch.added, patch.id
        assert patch.old_branch_does and patch.asked_at and patch.may_go, patch.id
