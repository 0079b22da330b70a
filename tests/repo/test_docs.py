"""The README and ``docs/`` stay true to the code, as ``test_error_tree.py`` keeps the failure types.

What is checked both ways (nothing missing from the page, nothing on the page
that the code no longer has): the settings the loader accepts against
``docs/configuration.md`` (and the MCP server keys against ``docs/mcp.md``),
the metrics defined in ``telemetry/`` against ``docs/metrics.md``, the
``agentsteps`` commands of the argument parser against ``docs/cli.md``,
``AgentResult``'s fields against ``docs/agent-spec.md``'s result table, and
every error type: each class of the exception tree is named in
``docs/failures.md``, and every exception class the package defines is in the
tree or named below as internal (with where it ends). Every
docs page is linked from the README, and every relative link in the README
and the docs resolves, anchor included.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel

from agentsteps.cli.failure_lines import LOG_LEVEL_ENV
from agentsteps.cli.main import _parser
from agentsteps.client import settings as loader
from agentsteps.contracts.config.mcp_config import HttpServerConfig, McpBreaker, McpTimeouts, StdioServerConfig
from agentsteps.contracts.config.schedules import ScheduleFile
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.spec import AgentResult
from agentsteps.failures import tree
from agentsteps.telemetry import metrics
from agentsteps.telemetry.runtime import TEMPORAL_WORKER_METRICS
from agentsteps.telemetry.workflow_metrics import WORKFLOW_METRICS

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

# The repository root, wherever in tests/ this file sits.
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# Set by the loader from the file it read, never by an operator.
NOT_A_SETTING = {"config_file"}


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (the whole heading text), up to the next heading of its level or above."""
    text = path.read_text()
    match = re.search(rf"^(#+) {re.escape(heading)}\n", text, re.M)
    assert match, f"{path.name} has no heading {heading!r}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def first_cells(text: str) -> list[str]:
    """The first cell of every body row of the markdown tables in ``text`` (header rows skipped)."""
    lines = text.splitlines()
    return [
        line.split("|")[1].strip()
        for i, line in enumerate(lines)
        if line.startswith("|")
        and not line.startswith("|---")
        and not (i + 1 < len(lines) and lines[i + 1].startswith("|---"))
    ]


def code_names(cells: list[str]) -> set[str]:
    return {name for cell in cells for name in re.findall(r"`([^`]+)`", cell)}


# --- configuration -------------------------------------------------------------------------------


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (directly, optionally, or as list items), if any."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
        if get_origin(candidate) is list:
            inner = _model_of(get_args(candidate)[0])
            if inner is not None:
                return inner
    return None


def setting_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        path = prefix + name
        keys.add(path)
        nested = _model_of(field.annotation)
        if nested is not None:
            keys |= setting_keys(nested, path + ".")
    return keys


def documented_worker_keys() -> set[str]:
    return code_names(first_cells(section(DOCS / "configuration.md", "The `[worker]` section")))


def documented_env_vars() -> set[str]:
    cells = first_cells(section(DOCS / "configuration.md", "Environment variables"))
    return {n for n in code_names(cells) if re.fullmatch(r"[A-Z][A-Z0-9_]+", n)}


def test_every_worker_setting_is_documented_and_every_documented_one_exists():
    accepted = setting_keys(WorkerSettings) - NOT_A_SETTING
    # A container key (``providers``) needs no row of its own when its keys have rows.
    containers = {k for k in accepted if any(other.startswith(k + ".") for other in accepted)}
    documented = documented_worker_keys()
    assert accepted - containers - documented == set(), "settings missing from docs/configuration.md"
    assert documented - accepted == set(), "docs/configuration.md lists settings WorkerSettings does not have"


def test_every_environment_variable_the_loader_reads_is_documented_and_vice_versa():
    # The settings loader's variables, and the CLI's own log level (read before any settings are).
    read = set(loader._ENV_FIELDS) | {loader.CONFIG_ENV, loader.SECRETS_DIR_ENV, LOG_LEVEL_ENV}
    documented = documented_env_vars()
    assert read - documented == set(), "variables the loader reads, missing from docs/configuration.md"
    assert documented - read == set(), "docs/configuration.md lists variables the loader never reads"


def _as_text(value: Any) -> str:
    if hasattr(value, "get_secret_value"):
        return value.get_secret_value()
    if isinstance(value, list):
        return ",".join(_as_text(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_each_environment_variable_reaches_the_setting_the_loader_names(tmp_path, monkeypatch):
    """The table's variables do what the loader says: each one's value lands on its key."""
    monkeypatch.chdir(tmp_path)  # no ./agentsteps.toml in the way
    numeric = ("_seconds", "port", "_processes", "_workflows", "_activities", "_tasks")
    for var, keys in loader._ENV_FIELDS.items():
        value = {"required_providers": "openai", "single_worker": "true", "capture_content": "true"}.get(
            keys[-1], "7" if keys[-1].endswith(numeric) else f"value-of-{var.lower()}"
        )
        target: Any = loader.load_settings(None, env={var: value})
        for key in keys:
            target = getattr(target, key)
        assert _as_text(target) == value, var


def test_every_schedule_file_key_is_documented_and_vice_versa():
    documented = code_names(first_cells(section(DOCS / "configuration.md", "Schedule files")))
    assert documented == set(ScheduleFile.model_fields)


def test_every_mcp_server_key_is_documented_and_vice_versa():
    table = section(DOCS / "mcp.md", "Declaring servers")
    documented = code_names(first_cells(table))
    accepted = set(StdioServerConfig.model_fields) | set(HttpServerConfig.model_fields)
    assert accepted - documented == set(), "MCP server keys missing from docs/mcp.md"
    assert documented - accepted == set(), "docs/mcp.md lists MCP server keys that do not exist"
    rows = {row.split("|")[1]: row for row in table.splitlines() if row.startswith("| `")}
    for key, model in (("timeouts", McpTimeouts), ("breaker", McpBreaker)):
        row = next(r for cell, r in rows.items() if f"`{key}`" in cell)
        for nested in model.model_fields:
            assert nested in row, f"docs/mcp.md: {key}.{nested} is not named in its row"


# --- metrics -------------------------------------------------------------------------------------


def _base(name: str) -> str:
    for suffix in ("_total", "_bucket", "_sum", "_count"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def defined_metrics() -> set[str]:
    names = {obj._name for obj in vars(metrics).values() if hasattr(obj, "_labelnames") and hasattr(obj, "_type")}
    names |= {m.name for m in WORKFLOW_METRICS}
    names |= {_base(n) for n in TEMPORAL_WORKER_METRICS}
    return names


def documented_metrics() -> set[str]:
    doc = (DOCS / "metrics.md").read_text()
    return {_base(m) for m in re.findall(r"^\| `([a-z_]+)` \|", doc, re.M)}


def test_every_metric_defined_in_telemetry_is_in_the_metrics_page_and_vice_versa():
    assert defined_metrics() - documented_metrics() == set(), "metrics missing from docs/metrics.md"
    assert documented_metrics() - defined_metrics() == set(), "docs/metrics.md lists metrics telemetry/ does not define"


def test_no_metric_is_created_outside_the_lists_this_test_reads():
    """A metric name written anywhere in telemetry/ is one of the defined ones (so the check above sees all)."""
    defined = defined_metrics()
    for path in (ROOT / "telemetry").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"agentsteps_[a-z_]+", node.value)
            ):
                assert _base(node.value) in defined, f"{path.name}: {node.value}"


# --- the CLI -------------------------------------------------------------------------------------


def cli_commands(parser: argparse.ArgumentParser, prefix: str = "agentsteps") -> set[str]:
    """Every command path: subparsers, and the fixed choices of a positional ``action``."""
    found: set[str] = set()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    actions = [a for a in parser._actions if not a.option_strings and a.dest == "action" and a.choices]
    for sub in subparsers:
        for name, child in sub.choices.items():
            found |= cli_commands(child, f"{prefix} {name}")
    for action in actions:
        found |= {f"{prefix} {choice}" for choice in action.choices}
    return found or {prefix}


def documented_commands() -> set[str]:
    return {n for n in code_names(first_cells((DOCS / "cli.md").read_text())) if n.startswith("agentsteps")}


def test_every_cli_command_is_documented_and_every_documented_command_exists():
    existing = cli_commands(_parser())
    assert len(existing) > 10, "the walk no longer sees the parser's commands"
    assert existing - documented_commands() == set(), "commands missing from docs/cli.md"
    assert documented_commands() - existing == set(), "docs/cli.md lists commands the CLI does not have"


def _code(text: str) -> list[str]:
    return re.findall(r"```.*?```", text, re.S) + re.findall(r"`[^`\n]+`", text)


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: p.name)
def test_every_command_the_docs_show_exists(path):
    commands = {c.split()[1] for c in cli_commands(_parser())}
    for block in _code(path.read_text()):
        for name in re.findall(r"(?<![\w./-])agentsteps (?:\[--config FILE\] |--config \S+ )?([a-z][a-z-]*)\b", block):
            assert name in commands, f"{path.name} shows `agentsteps {name}`, which is no command"


# --- links ---------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {
        (README.parent / link.split("#")[0]).resolve() for link in links(README) if not link.startswith(("http", "#"))
    }
    assert {p.resolve() for p in pages()} - linked == set()


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    for link in links(path):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, _, anchor = link.partition("#")
        resolved = (path.parent / target).resolve() if target else path
        assert resolved.exists(), f"{path.name}: {link} points at nothing"
        if anchor:
            assert resolved.suffix == ".md", f"{path.name}: {link}"
            assert anchor in anchors(resolved), f"{path.name}: {link}: no such heading in {resolved.name}"


def test_the_readme_stays_short_and_keeps_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) < 300
    assert "make demo" in text and "make test" in text
    assert "## Contents" in text


# Places the docs name before they exist, each with why.
NOT_YET_CREATED = {
    "tests/histories/payloads/": "where a recording that needs large payloads would commit them (docs/upgrades.md)",
    "tests/artifacts/console/": "made by the console's browser tests (screenshots, gitignored), not committed",
}


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: p.name)
def test_every_repository_path_the_docs_name_exists(path):
    """A file or folder named in code (`workflows/steps.py`) exists: moving a module means updating its docs."""
    folders = [p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")]
    named = re.findall(r"`((?:%s)/[\w./-]*)`" % "|".join(map(re.escape, folders)), path.read_text())
    missing = [n for n in named if n not in NOT_YET_CREATED and not (ROOT / n.rstrip("/")).exists()]
    assert missing == [], f"{path.name} names paths that do not exist: {missing}"


def test_every_field_of_agent_result_is_in_the_result_table_and_vice_versa():
    documented = [cell.strip("`") for cell in first_cells(section(DOCS / "agent-spec.md", "The result"))]
    assert documented == list(AgentResult.model_fields), "docs/agent-spec.md's result table, in the model's order"


def test_every_class_of_the_exception_tree_is_named_in_the_failures_page():
    text = (DOCS / "failures.md").read_text()
    assert sorted(name for name in tree() if f"`{name}`" not in text) == []


# Exception classes the package defines outside the tree, and where each ends: none reaches a caller as itself.
INTERNAL_EXCEPTIONS = {
    "BudgetRefused": "a program's llm() over budget: told to the program as its call's error",
    "QuotaRefused": "a tenant's hard budget: raised as BudgetExceededError (QuotaRefused.failure)",
    "PlanFirst": "workflows/calls.py: the worker's quota plan came back instead of the call; the run calls again",
    "ForeignCatalogError": "storage/tool_catalogs.py: becomes PayloadIntegrityError",
    "ForeignSegmentError": "storage/conversations.py: becomes PayloadIntegrityError",
    "BadFilter": "console/reads.py: a 400 naming the filter",
    "MalformedIdentity": "console/security.py: an auth proxy's header that is not a name; a 400 saying so",
    "SessionGone": "cli/chat.py: one line naming SessionClosedError / SessionNotFoundError",
    "SessionNotFound": "cli/chat.py: one line, 'no session ...'",
    "ServerLost": "cli/dev.py: the dev stack's server died; one line",
    "_Failed": "activities/sandbox/driver.py: private",
    "ReplayDiverged": "activities/sandbox/driver.py: a replayed program paused elsewhere; becomes InvalidProgramResume",
    "_NonFiniteNumber": "contracts/json_schema.py: private",
    "_Unresolvable": "contracts/composition/prover: private",
    "TicketError": "examples/tickets: the example MCP server's own errors, answered as MCP tool errors",
    "NotFoundError": "examples/tickets",
    "InvalidArgumentError": "examples/tickets",
    "IdempotencyConflictError": "examples/tickets",
}
_EXCEPTION_BASES = {"Exception", "RuntimeError", "ValueError", "LookupError", "KeyError", "TypeError"}


def test_every_exception_class_the_package_defines_is_in_the_tree_or_named_internal():
    from package_source import package_files

    defined: set[str] = set()
    for path in package_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                if bases & (_EXCEPTION_BASES | set(tree()) | set(INTERNAL_EXCEPTIONS)):
                    defined.add(node.name)
    assert sorted(defined - set(tree()) - set(INTERNAL_EXCEPTIONS)) == [], "add it to the tree (and docs/failures.md)"
    assert sorted(set(INTERNAL_EXCEPTIONS) - defined) == [], "named internal here, but no longer defined"
