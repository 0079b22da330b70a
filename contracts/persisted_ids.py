"""Every id, key and scope the engine persists, built and parsed in one place.

These strings outlive the code that writes them. They are recorded in
Temporal histories (activity inputs, step records, approval ids), bound into
stored payloads (conversation and catalog owners, snapshot and REPL
signatures), sent to other systems (effect keys as tools' idempotency keys,
the monitor's tracker keys, quota account workflow ids), and rebuilt by
readers that must match what a writer wrote (a fork finds a program's calls by
their ids; the worker checks a fork's state against its source's owner). So a
writer and its readers both call the builder here, and a format changes only
with a patch and a migration: ``tests/contracts/test_persisted_ids.py`` pins
every string.

| id | shape | written by |
|---|---|---|
| run scope | ``""``: an agent run's ids carry no prefix | ``RunConfig.scope`` |
| turn scope | ``t{turn}.`` | ``AgentRun.for_turn`` |
| program step | ``{scope}{model step}``; the monitor's ``scan`` | code mode |
| program key | ``{workflow id}/{first run id}/{program step}`` | ``program_keys`` |
| chain owner | ``{workflow id}/{first run id}`` | sessions, conversations |
| REPL key | ``{chain owner}/repl``; legacy ``{workflow id}/repl`` | ``SessionWorkflow`` |
| effect chain | ``scope:{key_scope}``, else the chain owner | ``run_chain`` |
| effect key | ``ak1-`` + 40 hex of SHA-256 (chain, scope, tool, arguments, ordinal) | ``EffectLedger`` |
| history effect key | ``history-{call index}`` | ``effects_in_history`` |
| tool step scope | ``step-{n}``; code mode ``program`` | the loops, pipelines |
| effect scope | ``{scope}{tool step scope}`` | ``AgentRun.call_tool`` |
| step call (approval id) | ``{scope}{model step}:{tool call id}`` | the tool loop |
| program call id | ``{scope}p{model step}-{sandbox call id}`` | code mode; rebuilt by forks |
| engine tool call id | ``call_{turn}_{index}``, then ``_{n}`` while taken | ``with_engine_call_ids`` |
| quota period key | ``2026-11-30`` (day), ``2026-11`` (month), UTC | ``Ledger`` (tenant spending) |
| quota lease id | ``{run id}/{n}`` | ``QuotaDesk.next_id`` |
| quota account id | ``agentsteps-quota-{name}``, ``agentsteps-tenant-{name}`` | ``client.quotas`` |
| run call key | ``{run id}:{call}``: releases before effect keys (the approval id as call) | ``releases.older_runs`` |
| pipeline key, no tools | ``{run id}:{step index}:{contract}`` | ``PipelineWorkflow`` |
| monitor keys | ``nudge:{issue}:{day}``, ``escalate:{issue}`` | ``MonitorWorkflow`` |
| monitor scan call | ``scan-{n}``, keyed ``{run id}:scan-{n}`` | ``MonitorWorkflow`` |
| named object key | ``deployment/{name}`` in the payload store | ``PayloadStore.write_named`` |
| fork ids | ``{source}-fork{step}-{tag}``; ``{source}-fork{turn}.{step}-{tag}`` | ``client.forks`` |

Builders take the parts as the writers have them and never fail. Parsers are
strict: they return the parts of a string of their shape and ``None`` for any
other string, never a near match. Numbers are ASCII digits without leading
zeros (``t03.`` or ``t٣.`` is no turn scope), so a parsed id always rebuilds
to the same string. Where a part may hold the separator (workflow ids may hold
``/``, ``:`` and ``-``; tool call ids anything), the parser splits on the
part that cannot (run ids, numbers, fixed suffixes).

Two shapes are ambiguous by construction and kept, since changing either would
move every key already written: an effect chain ``scope:{key_scope}`` equals
the chain of a workflow whose id starts with ``scope:`` (``parse_effect_chain``
reads it as a key scope), and the legacy REPL key of session ``a/b`` equals
the current REPL key of session ``a`` whose first run id is ``b`` (REPL keys
are only ever compared with ``repl_keys_of``'s pair, never parsed).

Pure: stdlib only, no I/O, no Temporal.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal

_N = r"(0|[1-9][0-9]*)"
"""A number as builders write it: ASCII digits, no leading zero."""
_SCOPE = rf"(?:t{_N}\.)?"
"""A run's scope inside a longer id: empty, or a turn scope."""


def _full(pattern: str) -> re.Pattern[str]:
    # ASCII: \w and friends never widen to other scripts; DOTALL: a free part may hold a newline.
    return re.compile(pattern, re.ASCII | re.DOTALL)


_NUMBER = _full(_N)

# ---------------------------------------------------------------- scopes

RUN_SCOPE = ""
"""An agent run's scope: its step calls, program calls and program steps carry no prefix."""

PROGRAM_EFFECT_SCOPE = "program"
"""Code mode's effect scope: every program of a run answers the same request, so an identical call in a
re-prompted program is the same effect."""

_TURN_SCOPE = _full(rf"t{_N}\.")
_STEP_SCOPE = _full(rf"step-{_N}")


def turn_scope(turn: int) -> str:
    """A session turn's scope, the prefix of every id its steps write: ``t3.``."""
    return f"t{turn}."


def parse_turn_scope(scope: str) -> int | None:
    """The turn of a turn scope; None for anything else (the run scope ``""`` included)."""
    m = _TURN_SCOPE.fullmatch(scope)
    return int(m[1]) if m else None


def step_scope(step: int) -> str:
    """A tool step's effect scope: ``step-{n}``, n the tool steps before it (a pipeline: its step index)."""
    return f"step-{step}"


def parse_step_scope(scope: str) -> int | None:
    m = _STEP_SCOPE.fullmatch(scope)
    return int(m[1]) if m else None


_EFFECT_SCOPE = _full(rf"({_SCOPE})(step-{_N}|{PROGRAM_EFFECT_SCOPE})")


def effect_scope(run_scope: str, logical_step: str) -> str:
    """An effect key's step: the run's scope and the logical step (a ``step_scope`` or ``program``), so equal
    calls in two turns of a session are two effects: ``step-0``, ``t2.step-0``, ``t2.program``."""
    return f"{run_scope}{logical_step}"


def parse_effect_scope(text: str) -> tuple[str, str] | None:
    """The run's scope and the logical step of an effect scope; None for anything else."""
    m = _EFFECT_SCOPE.fullmatch(text)
    return (m[1], m[3]) if m else None


# ---------------------------------------------------------------- calls a step makes


@dataclass(frozen=True)
class StepCall:
    """A tool-loop call: the run's scope, the model step, the model's tool call id."""

    scope: str
    step: int
    call_id: str


_STEP_CALL = _full(rf"({_SCOPE}){_N}:(.*)")


def step_call_id(scope: str, step: int, call_id: str) -> str:
    """A tool-loop call's approval id: ``0:call_15_0``, in a session ``t2.0:call_15_0``."""
    return f"{scope}{step}:{call_id}"


def parse_step_call_id(text: str) -> StepCall | None:
    m = _STEP_CALL.fullmatch(text)
    return StepCall(m[1], int(m[3]), m[4]) if m else None


def approval_delivery_id(workflow_id: str, run_id: str, approval_id: str, kind: str) -> str:
    """A webhook notice's delivery id (its receivers' idempotency key): the same on every retry of one
    notice, another for each waiting call, run and kind (``waiting``, ``reminder``)."""
    return f"{workflow_id}/{run_id}/{approval_id}/{kind}"


@dataclass(frozen=True)
class ProgramCall:
    """A code-mode call: the run's scope, the model step whose program made it, the sandbox's call id."""

    scope: str
    step: int
    call: int


_PROGRAM_CALL = _full(rf"({_SCOPE})p{_N}-{_N}")


def program_call_id(scope: str, step: int, call: int) -> str:
    """A program's call, as its step records, approvals and forks name it: ``p0-4``, in a session ``t2.p0-4``."""
    return f"{scope}p{step}-{call}"


def parse_program_call_id(text: str) -> ProgramCall | None:
    m = _PROGRAM_CALL.fullmatch(text)
    return ProgramCall(m[1], int(m[3]), int(m[4])) if m else None


@dataclass(frozen=True)
class EngineCallId:
    """A tool call id the engine gave: the assistant turns before the answer, the call's index in it,
    and the tie-breaker (0: none)."""

    turn: int
    index: int
    n: int = 0


_ENGINE_CALL = _full(rf"call_{_N}_{_N}(?:_([1-9][0-9]*))?")


def engine_call_id(turn: int, index: int, n: int = 0) -> str:
    """``call_{turn}_{index}``, or ``call_{turn}_{index}_{n}`` when that one is taken (n >= 1)."""
    return f"call_{turn}_{index}" if n == 0 else f"call_{turn}_{index}_{n}"


def parse_engine_call_id(text: str) -> EngineCallId | None:
    """The parts of an id of the engine's shape (a provider may send one of that shape too)."""
    m = _ENGINE_CALL.fullmatch(text)
    return EngineCallId(int(m[1]), int(m[2]), int(m[3]) if m[3] else 0) if m else None


# ---------------------------------------------------------------- chains, programs, REPLs


@dataclass(frozen=True)
class ChainOwner:
    """A workflow chain: its id and the first run id of its continue-as-new (and reset) chain."""

    workflow_id: str
    first_run_id: str


def chain_owner(workflow_id: str, first_run_id: str) -> str:
    """Who a chain's stored state belongs to, and what its effect keys are unique in: a new chain later
    started under the same id owns none of it."""
    return f"{workflow_id}/{first_run_id}"


def parse_chain_owner(text: str) -> ChainOwner | None:
    """Split at the last ``/`` (a run id holds none, a workflow id may); None when either part is empty."""
    workflow_id, slash, run_id = text.rpartition("/")
    return ChainOwner(workflow_id, run_id) if slash and workflow_id and run_id else None


def owned_by_workflow(owner: str, workflow_id: str | None) -> bool:
    """``owner`` is a chain owner of ``workflow_id`` (any chain of it): never of a workflow whose id merely
    starts with it, and of none when there is no workflow (an activity started on its own)."""
    parsed = parse_chain_owner(owner)
    return parsed is not None and workflow_id is not None and parsed.workflow_id == workflow_id


def program_step(scope: str, step: int) -> str:
    """A model step's program, inside its run: ``0``, in a session ``t2.0``."""
    return f"{scope}{step}"


_PROGRAM_STEP = _full(rf"({_SCOPE}){_N}")


def parse_program_step(text: str) -> tuple[str, int] | None:
    """The scope and model step of a program step; None for anything else (the monitor's ``scan`` too)."""
    m = _PROGRAM_STEP.fullmatch(text)
    return (m[1], int(m[3])) if m else None


@dataclass(frozen=True)
class ProgramKey:
    workflow_id: str
    chain_run_id: str
    step: str


def program_run_key(workflow_id: str, chain_run_id: str, step: str) -> str:
    """What one program's snapshots are signed for: the chain (its workflow id and first run id; before
    issue 22 the run id) and the program step."""
    return f"{workflow_id}/{chain_run_id}/{step}"


def parse_program_run_key(text: str) -> ProgramKey | None:
    """Split at the last two ``/`` (run ids and program steps hold none); None when a part is empty."""
    parts = text.rsplit("/", 2)
    if len(parts) != 3 or not all(parts):
        return None
    return ProgramKey(*parts)


REPL_SUFFIX = "/repl"


def repl_key(workflow_id: str, first_run_id: str) -> str:
    """What a session's REPL dumps are signed for: the chain."""
    return chain_owner(workflow_id, first_run_id) + REPL_SUFFIX


def legacy_repl_key(workflow_id: str) -> str:
    """The REPL key of sessions started by releases before owners: the session id alone."""
    return workflow_id + REPL_SUFFIX


def repl_keys_of(workflow_id: str, first_run_id: str) -> tuple[str, str]:
    """The REPL keys a session's dumps may be signed for: the current one first, then the legacy one."""
    return repl_key(workflow_id, first_run_id), legacy_repl_key(workflow_id)


# ---------------------------------------------------------------- effects

KEY_SCOPE_PREFIX = "scope:"
EFFECT_KEY_PREFIX = "ak1-"
_EFFECT_KEY = _full(r"ak1-[0-9a-f]{40}")
_HISTORY_EFFECT = _full(rf"history-{_N}")


def key_scope_chain(key_scope: str) -> str:
    """The effect chain of a run whose backend set ``key_scope``: runs with the same scope share keys."""
    return KEY_SCOPE_PREFIX + key_scope


def effect_chain(workflow_id: str, first_run_id: str, key_scope: str | None = None) -> str:
    """What effect keys are unique in: the backend's key scope, else the workflow chain."""
    return key_scope_chain(key_scope) if key_scope is not None else chain_owner(workflow_id, first_run_id)


def parse_effect_chain(text: str) -> str | ChainOwner | None:
    """The key scope (a ``str``) or the workflow chain an effect chain names; None for neither. A
    ``scope:`` prefix is read as a key scope (see the module's note on this ambiguity)."""
    if text.startswith(KEY_SCOPE_PREFIX):
        return text[len(KEY_SCOPE_PREFIX) :] or None
    return parse_chain_owner(text)


def effect_key(chain: str, scope: str, tool: str, canonical_arguments: str, ordinal: int) -> str:
    """The effect's key: a digest, so it holds no run id and no attempt, and leaks nothing of the arguments.
    ``canonical_arguments`` as ``contracts.llm.arguments.canonical_arguments`` gives them."""
    material = json.dumps([chain, scope, tool, canonical_arguments, ordinal])
    return EFFECT_KEY_PREFIX + hashlib.sha256(material.encode()).hexdigest()[:40]


def is_effect_key(text: str) -> bool:
    """``text`` has an effect key's shape (a digest cannot be parsed back into its parts)."""
    return _EFFECT_KEY.fullmatch(text) is not None


def history_effect_key(index: int) -> str:
    """A fork's record of an effect read from its source's history (no ledger): its call's index there."""
    return f"history-{index}"


def parse_history_effect_key(text: str) -> int | None:
    m = _HISTORY_EFFECT.fullmatch(text)
    return int(m[1]) if m else None


def run_call_key(run_id: str, call: str) -> str:
    """A key bound to one run: the keys of releases before effect keys (``run_id_key``: a step call or a
    program call), and reads that need no effect key."""
    return f"{run_id}:{call}"


def parse_run_call_key(text: str) -> tuple[str, str] | None:
    """Split at the first ``:`` (a Temporal run id holds none; the call part may)."""
    run_id, colon, call = text.partition(":")
    return (run_id, call) if colon and run_id and call else None


_PIPELINE_KEY = _full(rf"([^:]+):{_N}:(.+)")


def pipeline_call_key(run_id: str, step: int, contract: str) -> str:
    """A pipeline tool step's key when the worker gave it no schemas (no delivery to name the effect by)."""
    return run_call_key(run_id, f"{step}:{contract}")


def parse_pipeline_call_key(text: str) -> tuple[str, int, str] | None:
    """Split at the first ``:`` (a Temporal run id holds none; a contract name may)."""
    m = _PIPELINE_KEY.fullmatch(text)
    return (m[1], int(m[2]), m[3]) if m else None


# ---------------------------------------------------------------- the payload store

NAMED_OBJECT_PREFIX = "deployment/"


def named_object_key(name: str) -> str:
    """A small named object beside the content-addressed payloads (the snapshot key check): every worker of a
    deployment reads the one its first worker wrote."""
    return NAMED_OBJECT_PREFIX + name


def parse_named_object_key(text: str) -> str | None:
    name = text[len(NAMED_OBJECT_PREFIX) :] if text.startswith(NAMED_OBJECT_PREFIX) else ""
    return name if name and "/" not in name else None


# ---------------------------------------------------------------- quotas

AccountKind = Literal["quota", "tenant"]
QUOTA_ACCOUNT_PREFIX = "agentsteps-quota-"
TENANT_ACCOUNT_PREFIX = "agentsteps-tenant-"


QUEUE_REGISTRY_PREFIX = "agentsteps-queue-registry:"


def queue_registry_id(task_queue: str) -> str:
    """The workflow id of a task queue's registry (``QueueRegistry``): one per queue and namespace."""
    return QUEUE_REGISTRY_PREFIX + task_queue


def account_id(kind: AccountKind, name: str) -> str:
    """The workflow id of a quota's or a tenant's account."""
    return (QUOTA_ACCOUNT_PREFIX if kind == "quota" else TENANT_ACCOUNT_PREFIX) + name


def parse_account_id(text: str) -> tuple[AccountKind, str] | None:
    if text.startswith(QUOTA_ACCOUNT_PREFIX) and len(text) > len(QUOTA_ACCOUNT_PREFIX):
        return "quota", text[len(QUOTA_ACCOUNT_PREFIX) :]
    if text.startswith(TENANT_ACCOUNT_PREFIX) and len(text) > len(TENANT_ACCOUNT_PREFIX):
        return "tenant", text[len(TENANT_ACCOUNT_PREFIX) :]
    return None


_DAY_KEY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
_MONTH_KEY = re.compile(r"[0-9]{4}-[0-9]{2}", re.ASCII)


def period_key(period: str, now: float) -> str:
    """The UTC calendar day (``2026-11-30``) or month (``2026-11``) a tenant's spending at ``now`` counts in:
    kept in the account's ledger, so a new key starts the period's count afresh."""
    moment = datetime.fromtimestamp(now, UTC)
    return moment.strftime("%Y-%m-%d") if period == "day" else moment.strftime("%Y-%m")


def parse_period_key(text: str) -> tuple[Literal["day", "month"], date] | None:
    """The period and its first day; None for anything else (a day that does not exist included)."""
    try:
        if _DAY_KEY.fullmatch(text):
            return "day", date.fromisoformat(text)
        if _MONTH_KEY.fullmatch(text):
            return "month", date.fromisoformat(text + "-01")
    except ValueError:
        return None
    return None


def lease_request_id(run_id: str, n: int) -> str:
    """A quota lease request: unique in the run, and the same when its history is replayed under another
    workflow id."""
    return f"{run_id}/{n}"


def parse_lease_request_id(text: str) -> tuple[str, int] | None:
    run_id, slash, n = text.rpartition("/")
    return (run_id, int(n)) if slash and run_id and _NUMBER.fullmatch(n) else None


# ---------------------------------------------------------------- the monitor

_SCAN_CALL = _full(rf"scan-{_N}")


def nudge_key(issue_id: str, day: date) -> str:
    """The tracker's idempotency key for one nudge of an issue on one day."""
    return f"nudge:{issue_id}:{day.isoformat()}"


def parse_nudge_key(text: str) -> tuple[str, date] | None:
    head, colon, day = text.rpartition(":")
    if not (head.startswith("nudge:") and len(head) > len("nudge:") and colon and _DAY_KEY.fullmatch(day)):
        return None
    try:
        return head[len("nudge:") :], date.fromisoformat(day)
    except ValueError:  # 2026-02-30
        return None


def escalate_key(issue_id: str) -> str:
    """The tracker's idempotency key for an issue's escalation (once, ever)."""
    return f"escalate:{issue_id}"


def parse_escalate_key(text: str) -> str | None:
    return text[len("escalate:") :] if text.startswith("escalate:") and len(text) > len("escalate:") else None


def scan_call_id(call: int) -> str:
    """The monitor's scan program's call, as its tool activity names it."""
    return f"scan-{call}"


def parse_scan_call_id(text: str) -> int | None:
    m = _SCAN_CALL.fullmatch(text)
    return int(m[1]) if m else None


def scan_call_key(run_id: str, call: int) -> str:
    """A scan call's key: a read, so the run's own (a new run reads again)."""
    return run_call_key(run_id, scan_call_id(call))


def parse_scan_call_key(text: str) -> tuple[str, int] | None:
    run_id, colon, call = text.rpartition(":")
    n = parse_scan_call_id(call)
    return (run_id, n) if colon and run_id and n is not None else None


# ---------------------------------------------------------------- fork workflow ids


@dataclass(frozen=True)
class ForkId:
    """A fork's default workflow id: its source, where it starts (a session's: the turn too), a random tag."""

    source: str
    at_step: int
    suffix: str
    turn: int | None = None


_RUN_FORK = _full(rf"(.+)-fork{_N}-([0-9a-f]{{8}})")
_SESSION_FORK = _full(rf"(.+)-fork{_N}\.{_N}-([0-9a-f]{{8}})")


def fork_run_id(source: str, at_step: int, suffix: str) -> str:
    """``{source}-fork{at_step}-{suffix}``; ``suffix`` is 8 hex digits (``uuid4().hex[:8]``)."""
    return f"{source}-fork{at_step}-{suffix}"


def fork_session_id(source: str, turn: int, at_step: int, suffix: str) -> str:
    """``{source}-fork{turn}.{at_step}-{suffix}``; ``suffix`` is 8 hex digits (``uuid4().hex[:8]``)."""
    return f"{source}-fork{turn}.{at_step}-{suffix}"


def parse_fork_id(text: str) -> ForkId | None:
    """A default fork id's parts (the last ``-fork`` names this fork: a fork of a fork keeps its source's
    whole id); None for a chosen id of another shape."""
    m = _RUN_FORK.fullmatch(text)
    if m:
        return ForkId(m[1], int(m[2]), m[3])
    m = _SESSION_FORK.fullmatch(text)
    return ForkId(m[1], int(m[3]), m[4], turn=int(m[2])) if m else None


__all__ = [
    "QUEUE_REGISTRY_PREFIX",
    "queue_registry_id",
    "approval_delivery_id",
    "EFFECT_KEY_PREFIX",
    "KEY_SCOPE_PREFIX",
    "NAMED_OBJECT_PREFIX",
    "PROGRAM_EFFECT_SCOPE",
    "QUOTA_ACCOUNT_PREFIX",
    "REPL_SUFFIX",
    "RUN_SCOPE",
    "TENANT_ACCOUNT_PREFIX",
    "AccountKind",
    "ChainOwner",
    "EngineCallId",
    "ForkId",
    "ProgramCall",
    "ProgramKey",
    "StepCall",
    "account_id",
    "chain_owner",
    "effect_chain",
    "effect_key",
    "effect_scope",
    "engine_call_id",
    "escalate_key",
    "fork_run_id",
    "fork_session_id",
    "history_effect_key",
    "is_effect_key",
    "key_scope_chain",
    "lease_request_id",
    "legacy_repl_key",
    "named_object_key",
    "nudge_key",
    "owned_by_workflow",
    "parse_account_id",
    "parse_chain_owner",
    "parse_effect_chain",
    "parse_engine_call_id",
    "parse_effect_scope",
    "parse_escalate_key",
    "parse_fork_id",
    "parse_history_effect_key",
    "parse_lease_request_id",
    "parse_named_object_key",
    "parse_nudge_key",
    "parse_period_key",
    "parse_pipeline_call_key",
    "parse_program_call_id",
    "parse_program_run_key",
    "parse_program_step",
    "parse_run_call_key",
    "parse_scan_call_id",
    "parse_scan_call_key",
    "parse_step_call_id",
    "parse_step_scope",
    "parse_turn_scope",
    "period_key",
    "pipeline_call_key",
    "program_call_id",
    "program_run_key",
    "program_step",
    "repl_key",
    "repl_keys_of",
    "run_call_key",
    "scan_call_id",
    "scan_call_key",
    "step_call_id",
    "step_scope",
    "turn_scope",
]
