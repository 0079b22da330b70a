"""Every failure a run can end with is one class in the exception tree, and
every class crosses Temporal through one seam (``failures/``).

The tree is read from the classes themselves, not from the source: each is
drawn in ``contracts/errors.py``'s docstring, listed in docs/failures.md's
table with the retry behaviour its ``retryable`` says, and goes to an
``ApplicationError`` and back unchanged. No module of the package builds an
``ApplicationError`` by hand or compares a failure's type with a string: the
seam is the only place a type name is spelt.
"""

from __future__ import annotations

import ast
import re

import pytest
from package_source import ROOT, package_files
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from agentsteps.contracts import errors
from agentsteps.contracts.errors import AgentStepsError, RetryableProviderError
from agentsteps.failures import from_failure, to_application_error, tree

SEAM = ROOT / "failures" / "seam.py"


def docstring_tree() -> set[str]:
    """Class names drawn in the tree of ``contracts/errors.py``'s docstring (its indented lines)."""
    doc = errors.__doc__ or ""
    return set(re.findall(r"^ {4}[ │├└─]*([A-Z]\w+)\b", doc, re.MULTILINE))


def documented_failure_rows() -> dict[str, str]:
    """Failure type -> its "retried" cell in docs/failures.md's table."""
    text = (ROOT / "docs" / "failures.md").read_text()
    section = text.split("## Every type", 1)[1]
    section = re.split(r"^#{1,3} ", section, maxsplit=1, flags=re.MULTILINE)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    found: dict[str, str] = {}
    for row in rows[1:]:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        for name in re.findall(r"`(\w+)`", cells[0]):
            found[name] = cells[-1]
    return found


def _instance(cls: type[AgentStepsError], message: str) -> AgentStepsError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    return error


def _activity_failure(cause: ApplicationError) -> ActivityError:
    failure = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="llm.call",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    failure.__cause__ = cause
    return failure


def test_the_tree_holds_every_branch():
    # One from each module that defines part of it: errors.py, mcp.py, composition/contract.py.
    assert {"ContractViolationError", "McpUnavailableError", "CompositionError", "SessionBusyError"} <= set(tree())


@pytest.mark.parametrize("name", sorted(tree()))
def test_every_class_crosses_the_seam_and_comes_back_as_itself(name):
    cls = tree()[name]
    sent = to_application_error(_instance(cls, f"{name} happened"), {"detail": 1})
    assert sent.type == name and sent.message == f"{name} happened" and list(sent.details) == [{"detail": 1}]
    assert sent.non_retryable is (cls.retryable is False)
    for failure in (sent, _activity_failure(sent)):
        back = from_failure(failure)
        assert type(back) is cls and str(back) == f"{name} happened" and back.details == ({"detail": 1},)


def test_a_retry_after_becomes_the_next_retry_delay():
    sent = to_application_error(RetryableProviderError("429", status=429, retry_after=7.5))
    assert sent.next_retry_delay is not None and sent.next_retry_delay.total_seconds() == 7.5
    assert not sent.non_retryable


def test_a_failure_that_is_not_ours_is_not_rebuilt():
    assert from_failure(ApplicationError("boom", type="ValueError")) is None
    assert from_failure(ApplicationError("boom")) is None
    assert from_failure(_activity_failure(ApplicationError("x", type="AgentStepsErrorNot"))) is None
    assert from_failure(RuntimeError("not a failure")) is None
    assert from_failure(None) is None


def test_a_type_off_the_wire_never_imports_anything():
    # The name of a module that exists but is not a class of the tree is just unknown.
    assert from_failure(ApplicationError("x", type="agentsteps.worker")) is None
    assert from_failure(ApplicationError("x", type="object")) is None


def test_every_class_in_the_tree_is_drawn_in_the_errors_docstring():
    drawn = docstring_tree()
    assert set(tree()) - drawn == set()
    assert drawn - set(tree()) == set(), "the docstring draws classes that do not exist"


# Raised before a run or outside one (the CLI, the worker's start-up): never a run's failure type.
NOT_A_RUN_FAILURE = {
    "AgentStepsError",
    "ProviderError",
    "McpError",
    "SessionError",
    "ToolError",
    "ScheduleFileError",
    "ScheduleNotFoundError",
    "DeploymentConfigError",
    "ConsoleConfigError",
    "StackConflictError",
    "HistoryUnavailableError",
}


def test_every_failure_type_is_in_the_docs_table_with_its_retry_behaviour():
    rows = documented_failure_rows()
    missing = sorted(set(tree()) - NOT_A_RUN_FAILURE - set(rows))
    assert missing == [], f"failure types missing from docs/failures.md: {missing}"
    for name, retried in rows.items():
        cls = tree()[name]
        says_yes = retried.startswith("yes") or (retried.startswith("only") and f"`{name}`" in retried)
        assert says_yes is bool(cls.retryable), (
            f"docs/failures.md says {name} is retried {retried!r}; retryable={cls.retryable}"
        )


def _is_application_error(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "ApplicationError")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "ApplicationError")
    )


def _compares_type_with_a_string(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    # A failure type spelt by hand: a class name of the tree, or ``SomeError.__name__``.
    return any(isinstance(s, ast.Attribute) and s.attr == "type" for s in sides) and any(
        (isinstance(s, ast.Constant) and s.value in tree()) or (isinstance(s, ast.Attribute) and s.attr == "__name__")
        for s in sides
    )


def test_only_the_seam_builds_an_application_error_or_reads_its_type():
    wrong = []
    for path in package_files():
        if path == SEAM:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if _is_application_error(node) or _compares_type_with_a_string(node):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert wrong == [], "use failures.to_application_error / from_failure:\n" + "\n".join(wrong)
