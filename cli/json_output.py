"""Every ``--json`` output names its shape, so a consumer can tell what it reads.

Each one is a JSON object whose first key is ``"schema": "agentsteps/<shape>@<major>"``.
The major number changes only on an incompatible change (a key removed or
renamed, a type or meaning changed); a new key keeps it, so consumers ignore
keys they do not know. The JSON Schema of each shape is in ``docs/cli-json/``;
``tests/client_cli/test_cli_json.py`` validates real output against it, and refuses a
change to a released shape that an old consumer could not read (the policy:
``docs/compatibility.md``).

These strings are compatibility data, like the names in ``contracts/names.py``:
never edited in place, only superseded by a new major.
"""

from __future__ import annotations

import json
from typing import IO, Any

RUN = "agentsteps/run@1"
"""``run --spec … --json``: the run's ``AgentResult``."""
PIPELINE_RUN = "agentsteps/pipeline-run@1"
"""``run --pipeline … --json``: the ``PipelineResult``."""
CHECK = "agentsteps/check@1"
"""``check --json``: the edge reports, or why the file is invalid."""
TOOLS_LIST = "agentsteps/tools-list@1"
"""``tools list --json``: every tool with its schemas, and each MCP server's health."""
SCHEDULE_LIST = "agentsteps/schedule-list@1"
"""``schedule list --json``: one row per schedule."""
SCHEDULE_CHANGES = "agentsteps/schedule-changes@1"
"""``schedule apply|pause|resume|trigger --json``: what was done to each schedule."""
PAYLOADS_GC = "agentsteps/payloads-gc@1"
"""``payloads gc --json``: what the collector found (and deleted, with ``--delete``)."""
REPLAY_CHECK = "agentsteps/replay-check@1"
"""``replay --check --json``: each recorded history's verdict on this build."""
COUNTERFACTUAL = "agentsteps/counterfactual@1"
"""``replay WORKFLOW_ID... --json``: each recorded run beside its replay, and the totals."""
FORK = "agentsteps/fork@1"
"""``fork --json``: the fork's id, what it was forked from, and its ``AgentResult``."""
QUOTA_ACCOUNT = "agentsteps/quota-account@1"
"""``quota show|set --json`` and ``budget show|set --json``: the account's live limits and use (``AccountView``)."""
ERROR = "agentsteps/error@1"
"""Any ``--json`` command that failed before printing its document: the failure, as the one document."""

SHAPES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("run",): (RUN, PIPELINE_RUN, ERROR),
    ("check",): (CHECK, ERROR),
    ("tools", "list"): (TOOLS_LIST, ERROR),
    ("schedule",): (SCHEDULE_LIST, SCHEDULE_CHANGES, ERROR),
    ("payloads", "gc"): (PAYLOADS_GC, ERROR),
    ("replay",): (REPLAY_CHECK, COUNTERFACTUAL, ERROR),
    ("fork",): (FORK, ERROR),
    ("quota", "show"): (QUOTA_ACCOUNT, ERROR),
    ("quota", "set"): (QUOTA_ACCOUNT, ERROR),
    ("budget", "show"): (QUOTA_ACCOUNT, ERROR),
    ("budget", "set"): (QUOTA_ACCOUNT, ERROR),
}
"""Each command that takes ``--json`` and the shapes it may print (``ERROR`` when it fails before its own:
``cli/json_stdout.py``)."""


def versioned(shape: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its shape named first; a body may not carry its own ``schema`` key."""
    if "schema" in body:
        raise ValueError(f"{shape}: the body already has a 'schema' key")
    return {"schema": shape, **body}


def print_json(shape: str, body: dict[str, Any], out: IO[str] | None = None, *, indent: int | None = 2) -> None:
    """Print one ``--json`` document: ``body`` under its shape's name."""
    print(json.dumps(versioned(shape, body), indent=indent), file=out)
