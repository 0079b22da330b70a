"""Code mode's pure types: program limits, the sandbox activities' inputs and
outputs, and the capped view of a finished program the model reads.

A program is Python run by Monty, outside the workflow. It pauses whenever it
awaits tool calls; the paused interpreter is a signed snapshot in the payload
store, referenced here by ``SnapshotRef`` so workflow history holds a digest,
never the interpreter's memory.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..violations import Violation

LLM_FUNCTION = "llm"
"""The one non-tool function a program may call: an LLM activity under the same contracts."""

DEFAULT_OUTPUT_CAP = 4096


class ProgramLimits(BaseModel):
    """Resource limits for one program. Every limit is enforced by the sandbox
    or the driver, so a hostile program ends with a typed error, not a hung worker."""

    segment_seconds: float = Field(default=5.0, gt=0)
    """Interpreter time between two pauses (a pause is waiting on tool calls)."""
    total_seconds: float = Field(default=60.0, gt=0)
    """Interpreter time over the whole program; time spent waiting on tools is free."""
    memory_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    recursion_depth: int = Field(default=200, gt=0)
    max_tool_calls: int = Field(default=1000, gt=0)
    """Calls of tools and ``llm`` over the whole program, counted by call id."""
    output_bytes: int = Field(default=DEFAULT_OUTPUT_CAP, gt=0)
    """Printed output kept; the rest is dropped with a visible notice."""


class SnapshotRef(BaseModel):
    """Where a paused program lives, and the proof a worker wrote it."""

    sha256: str
    """Digest of the snapshot bytes: the content address."""
    size: int
    signature: str
    """HMAC-SHA256, hex, over the run key and the digest, with a key only workers hold."""
    driver: str
    claim: dict[str, str]
    """The payload store's claim for the bytes (local path or S3 key)."""
    key_id: str | None = None
    """Which worker key signed it (a digest of the key, never the key); None in snapshots from
    before key rotation, which are checked against every configured key."""


class VariableInfo(BaseModel):
    """A variable left in a session's REPL: its name and type, never its value."""

    name: str
    type: str
    """The Python type's name (``list``, ``dict``, ``int``, ``function`` ...)."""
    size: int | None = None
    """``len()`` of the value where it has one (items of a list or dict, characters of a str)."""


class ReplMemory(BaseModel):
    """A code-mode session's REPL state between turns: variables are the model's memory."""

    key: str
    """What the dump is signed for (the session), so another session's state never loads."""
    snapshot: SnapshotRef | None = None
    variables: list[VariableInfo] = Field(default_factory=list)


class PendingCall(BaseModel):
    """A call the program made and now waits on (or will await later)."""

    call_id: int
    function: str
    """The Python name the program called (see ``ProgramFunction``)."""
    arguments: str
    """JSON object of the arguments, keyed by parameter name."""


class CallOutcome(BaseModel):
    """A finished call, handed back to the program."""

    call_id: int
    value: Any = None
    error: str | None = None
    """Set when the call failed; the program sees a ``RuntimeError`` with this text."""


ProgramErrorKind = Literal[
    "exception",  # the program raised and did not catch it
    "syntax",
    "type",
    "timeout",
    "memory",
    "recursion",
    "tool_call_limit",
    "not_serializable",
    "crashed",  # the interpreter process died (contained by the pool)
]


class ProgramError(BaseModel):
    kind: ProgramErrorKind
    message: str


class ReplayLog(BaseModel):
    """What rebuilds a paused program on a worker without a live copy (deterministic replay).

    The program re-runs from ``base`` (or from its start, with the same clock, seed and REPL) and each
    pause it reaches is answered with the next batch of recorded outcomes, as Temporal replays workflow
    code against its history. Built by the workflow from what it already holds, or by a fork from the
    source's recorded segments."""

    program: str
    now: str
    seed: int
    repl: ReplMemory | None = None
    base: SnapshotRef | None = None
    """The last snapshot stored for the program (a long wait, or replay past its bound); None: the start."""
    batches: list[list[CallOutcome]] = Field(default_factory=list)
    """Outcomes the program was resumed with since ``base``, one batch per pause, in order."""


class ProgramStatus(BaseModel):
    """What ``code.start`` and ``code.resume`` return: paused, completed or failed."""

    state: Literal["pending", "completed", "failed"]
    calls: list[PendingCall] = Field(default_factory=list)
    """Calls made during this segment; the workflow runs each as its own activity."""
    awaiting: list[int] = Field(default_factory=list)
    """Call ids the program is blocked on; resume once all of them have outcomes."""
    snapshot: SnapshotRef | None = None
    value: Any = None
    """The program's final value (JSON), when completed."""
    output: str = ""
    """Printed output so far, capped, with a truncation notice when cut."""
    output_dropped: int = 0
    """Characters of printed output dropped by the cap."""
    error: ProgramError | None = None
    calls_made: int = 0
    sandbox_seconds: float = 0.0
    """Interpreter time used so far, over all segments."""
    repl: ReplMemory | None = None
    """Sessions, on completion: the REPL state with this program's variables, and what they are."""
    live: str | None = None
    """Paused and kept live on the worker that ran the segment: the id its next ``code.resume`` names.
    Any other worker (or this one after an eviction or a restart) rebuilds it by replay instead."""
    needs_replay: bool = False
    """``code.resume`` found no live copy and was given no ``ReplayLog``: ask again with one."""
    replay: ReplayLog | None = None
    """``code.start`` of a program kept live: what a replay starts from (no batches); a fork reads it."""
    fed: list[CallOutcome] = Field(default_factory=list)
    """The outcomes this segment was resumed with (programs kept live): a fork replays them."""
    replay_calls: int = 0
    """Pauses since the last stored snapshot: what a replay would have to go through."""
    replay_seconds: float = 0.0
    """Interpreter seconds recorded since the last stored snapshot: what a replay would recompute."""


class ProgramFunction(BaseModel):
    """A function the program can call: its Python name, the tool behind it and
    the parameter order used to name positional arguments."""

    python_name: str
    tool: str
    """Tool name, or ``llm`` for the LLM function."""
    params: list[str] = Field(default_factory=list)
    required: list[str] = Field(default_factory=list)
    """Optional parameters left at ``None`` are omitted from the tool's arguments."""
    long_wait: bool = False
    """A call that may wait long (for an approval): the program paused on it is stored as a snapshot, so it
    resumes without a replay after days and across worker upgrades."""


class CheckProgramInput(BaseModel):
    program: str
    stubs: str


class CheckProgramResult(BaseModel):
    violations: list[Violation] = Field(default_factory=list)
    """Kinds ``program_syntax`` and ``program_type``, with line:column paths."""


class ForkedProgram(BaseModel):
    """A fork that starts inside one of the source's programs: the program as it was, paused, before
    one of its calls. The fork resumes it (its memory re-bound to the fork by the worker) instead of
    asking its model for a program, and makes the calls the source made from there on."""

    step: int = Field(ge=0)
    """The source's model step whose program this is."""
    call_id: int = Field(ge=0)
    """The program's call the fork starts before (calls that paused with it are made again too)."""
    chain_run_id: str
    """The source chain's first run id: with the source's workflow id and ``step``, the key the
    snapshot is signed for (``persisted_ids.program_run_key``)."""
    content: str
    """The source model's answer holding the program."""
    model: str
    program: str
    paused: ProgramStatus
    """The source's program paused (``state == "pending"``): its snapshot, the calls issued and not
    yet answered (the fork makes them), the ones it waits on, its output and counters so far."""


class ForkProgramInput(BaseModel):
    """``code.fork``: a source's paused program, re-bound to the fork that resumes it."""

    source_key: str
    """What ``paused.snapshot`` is signed for: the source's program (``persisted_ids.program_run_key``).
    The worker checks the snapshot against this key only, so a fork loads only the program its input names."""
    run_key: str
    """The fork's program key: the snapshot comes back signed for it, and every later one too."""
    paused: ProgramStatus


class StartProgramInput(BaseModel):
    run_key: str
    """Binds snapshots to one run's chain and program (workflow id, the chain's first run id, step): a
    snapshot signed for another run does not load, and a ``temporal workflow reset`` (same chain) still
    does (``workflows/program_driver.program_keys``)."""
    legacy_run_key: str | None = None
    """The key snapshots were signed over before issue 22 (the run id in place of the chain's first):
    a program paused by an older build still resumes. None when the two are the same."""
    program: str
    functions: list[ProgramFunction]
    limits: ProgramLimits = Field(default_factory=ProgramLimits)
    now: str
    """Workflow time (ISO 8601) the program's clock is frozen at."""
    seed: int
    """From ``workflow.random()``: the program's ``random`` is reproducible."""
    repl: ReplMemory | None = None
    """Sessions: run in this REPL state, and dump it again when the program completes."""
    variable_names: list[str] = Field(default_factory=list)
    """Names the REPL may hold afterwards (earlier variables and this program's top-level names)."""
    keep_live: bool = False
    """Keep the paused program live on the worker and store no snapshot per pause (issue 39); False: a
    snapshot per pause, as runs started before it were driven."""


class ResumeProgramInput(BaseModel):
    run_key: str
    legacy_run_key: str | None = None
    """As in ``StartProgramInput``: only checked when ``run_key`` does not verify."""
    snapshot: SnapshotRef | None = None
    """The paused program as a snapshot (runs driven a snapshot per pause); None when it is kept live."""
    live: str | None = None
    """The live program's id (``ProgramStatus.live``), tried first."""
    replay: ReplayLog | None = None
    """Given after a ``needs_replay`` answer (or by a fork): how to rebuild the program here."""
    replay_calls: int = 0
    replay_seconds: float = 0.0
    functions: list[ProgramFunction]
    outcomes: list[CallOutcome]
    limits: ProgramLimits = Field(default_factory=ProgramLimits)
    output: str = ""
    output_dropped: int = 0
    calls_made: int = 0
    sandbox_seconds: float = 0.0
    repl: ReplMemory | None = None
    """As in ``StartProgramInput``: only ``key`` is used, to sign the dump on completion."""
    variable_names: list[str] = Field(default_factory=list)


# The model reads a finished program through this cap, never the raw output.


def truncation_notice(dropped: int) -> str:
    return f"\n[output truncated: {dropped} more characters not shown]"


def capped_view(value: Any, output: str, dropped: int, cap: int = DEFAULT_OUTPUT_CAP) -> str:
    """What the model reads about a finished program: its value and printed
    output, at most ``cap`` characters each, cut with a visible notice."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > cap:
        text = text[:cap] + truncation_notice(len(text) - cap)
    shown = output + (truncation_notice(dropped) if dropped else "")
    return f"Program value:\n{text}\nPrinted output:\n{shown or '(none)'}"
