"""Type-check a program against the tool stubs, without running any of it.

Monty checks a feed before executing it. The program is fed wrapped in an
``async def`` that is never called: the whole body is checked (top-level
``await`` included) and nothing runs. Diagnostics are mapped back to the
program's own lines and columns.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_monty import MontyError, MontySyntaxError, MontyTypingError

from ...contracts.violations import Violation, ViolationKind
from .pool import SandboxPool

CONTRACT = "code.program"
_WRAPPER = "async def __agentsteps_program__():\n"
_INDENT = "    "
_MAX_DIAGNOSTICS = 20


def wrap(program: str) -> str:
    body = "".join(_INDENT + line for line in program.splitlines(keepends=True)) or _INDENT + "pass\n"
    return _WRAPPER + body + ("" if body.endswith("\n") else "\n") + _INDENT + "pass\n"


async def check_program(pool: SandboxPool, program: str, stubs: str) -> list[Violation]:
    if not program.strip():
        return [_violation(ViolationKind.program_syntax, "$.program", "the program is empty")]
    async with pool.session(type_check=True, type_check_stubs=stubs, type_check_format="json") as session:
        try:
            await session.feed_run(wrap(program))
        except MontyTypingError as exc:
            return _from_diagnostics(exc.display(), program)
        except MontySyntaxError as exc:
            return [_violation(ViolationKind.program_syntax, "$.program", exc.display("type-msg"))]
        except MontyError as exc:
            return [_violation(ViolationKind.program_type, "$.program", str(exc))]
    return []


def _from_diagnostics(rendered: str, program: str) -> list[Violation]:
    try:
        diagnostics: list[dict[str, Any]] = json.loads(rendered)
    except json.JSONDecodeError:
        return [_violation(ViolationKind.program_type, "$.program", rendered)]
    lines = program.splitlines()
    violations = []
    for d in diagnostics:
        if d.get("severity") not in (None, "error", "fatal"):
            continue
        loc = d.get("location") or {}
        line = max(1, int(loc.get("row", 2)) - 1)
        column = max(1, int(loc.get("column", 5)) - len(_INDENT))
        code = d.get("code") or d.get("name") or "error"
        kind = ViolationKind.program_syntax if code == "invalid-syntax" else ViolationKind.program_type
        source = lines[line - 1].strip() if line <= len(lines) else ""
        message = f"{code}: {d.get('message', '')}" + (f"  (line {line}: `{source}`)" if source else "")
        violations.append(_violation(kind, f"$.program:{line}:{column}", message))
        if len(violations) >= _MAX_DIAGNOSTICS:
            break
    return violations or [_violation(ViolationKind.program_type, "$.program", rendered[:2000])]


def _violation(kind: ViolationKind, path: str, message: str) -> Violation:
    return Violation(contract=CONTRACT, phase="post", kind=kind, path=path, message=message)
