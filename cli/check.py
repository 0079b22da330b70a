"""``agentsteps check FILE``: the static proof of a pipeline's edges, for CI.

Exit codes: 0 every edge proven or acknowledged; 1 a refuted edge or an
unacknowledged unproven one; 2 the file itself is invalid.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from ..client.pipeline_files import load_pipeline_file
from ..contracts.composition.contract import EdgeReport, check_edges
from ..contracts.composition.prover import Verdict
from ..contracts.errors import InvalidSpecError
from .json_output import CHECK, print_json

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def _status(e: EdgeReport) -> str:
    if e.verdict is Verdict.unproven:
        return "unproven (acknowledged)" if e.acknowledged else "unproven"
    return e.verdict.value


def _detail(e: EdgeReport) -> list[str]:
    lines: list[str] = []
    if e.verdict is not Verdict.proven:
        lines.append(f"at {e.path}: {e.reason}")
    if e.counterexample is not None:
        lines.append("counterexample: " + json.dumps(e.counterexample.value, sort_keys=True))
    if e.acknowledged:
        lines.append("checked at run time on every value")
    lines.extend(f"checked at run time: {c}" for c in e.runtime_checks)
    return lines


def render_table(name: str, steps: int, edges: list[EdgeReport], final_checks: list[str] | None = None) -> str:
    width = max([len("EDGE"), *(len(e.edge) for e in edges)])
    status_width = max([len("VERDICT"), *(len(_status(e)) for e in edges)])
    out = [
        f"pipeline {name}: {steps} steps, {len(edges)} edges",
        f"{'EDGE':<{width}}  {'VERDICT':<{status_width}}  DETAIL",
    ]
    for e in edges:
        detail = _detail(e) or [""]
        out.append(f"{e.edge:<{width}}  {_status(e):<{status_width}}  {detail[0]}".rstrip())
        out.extend(f"{'':<{width}}  {'':<{status_width}}  {line}" for line in detail[1:])
    out.extend(f"Post_C, checked at run time: {c}" for c in final_checks or [])
    failing = [e for e in edges if not e.ok]
    refuted = sum(e.verdict is Verdict.refuted for e in failing)
    unproven = len(failing) - refuted
    out.append(
        "result: OK" if not failing else f"result: FAILED ({refuted} refuted, {unproven} unproven and not acknowledged)"
    )
    return "\n".join(out)


def check_command(path: str, as_json: bool, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        loaded = load_pipeline_file(path)
        edges = check_edges(loaded.contracts, loaded.spec.acknowledge_unproven)
    except InvalidSpecError as exc:
        if as_json:
            body = {
                "ok": False,
                "error": "InvalidSpecError",
                "violations": [v.model_dump(mode="json") for v in exc.violations],
            }
            print_json(CHECK, body, out)
        else:
            print(f"{path}: invalid pipeline", file=out)
            for v in exc.violations:
                print(f"  {v.path}: {v.message}", file=out)
        return EXIT_INVALID
    ok = all(e.ok for e in edges)
    if as_json:
        body = {
            "pipeline": loaded.spec.name,
            "ok": ok,
            "edges": [{**e.model_dump(mode="json"), "ok": e.ok} for e in edges],
        }
        print_json(CHECK, body, out)
    else:
        last = loaded.contracts[-1]
        finals = [f"post {last.name}: {p}" for p in last.post]
        print(render_table(loaded.spec.name, len(loaded.contracts), edges, finals), file=out)
    return EXIT_OK if ok else EXIT_FAILED
