"""Every persisted id, key and scope: built and parsed by ``contracts/persisted_ids.py`` alone.

Three kinds of proof. Pins: the exact string each builder gives for known
parts, and the effect keys recomputed from the parts of runs recorded in
``tests/histories/`` (a changed format fails here, not in a user's fork).
Round trips: for generated parts, awkward ones included (digits, dots,
dashes, colons, slashes, newlines, any script), parsing what a builder wrote
gives the parts back. Hostile input: a parser returns None or the parts of
exactly that string, never a near match; and the shapes that share a
namespace (approval ids) never both parse.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsteps.contracts.llm.arguments import canonical_arguments
from agentsteps.contracts.persisted_ids import (
    RUN_SCOPE,
    ChainOwner,
    EngineCallId,
    ForkId,
    ProgramCall,
    ProgramKey,
    StepCall,
    account_id,
    chain_owner,
    effect_chain,
    effect_key,
    effect_scope,
    engine_call_id,
    escalate_key,
    fork_run_id,
    fork_session_id,
    history_effect_key,
    is_effect_key,
    lease_request_id,
    legacy_repl_key,
    named_object_key,
    nudge_key,
    owned_by_workflow,
    parse_account_id,
    parse_chain_owner,
    parse_effect_chain,
    parse_effect_scope,
    parse_engine_call_id,
    parse_escalate_key,
    parse_fork_id,
    parse_history_effect_key,
    parse_lease_request_id,
    parse_named_object_key,
    parse_nudge_key,
    parse_period_key,
    parse_pipeline_call_key,
    parse_program_call_id,
    parse_program_run_key,
    parse_program_step,
    parse_run_call_key,
    parse_scan_call_id,
    parse_scan_call_key,
    parse_step_call_id,
    parse_step_scope,
    parse_turn_scope,
    period_key,
    pipeline_call_key,
    program_call_id,
    program_run_key,
    program_step,
    repl_key,
    repl_keys_of,
    run_call_key,
    scan_call_id,
    scan_call_key,
    step_call_id,
    step_scope,
    turn_scope,
)
from agentsteps.contracts.session import repl_keys, session_owner

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

PERSISTED = "this id is persisted: recorded histories, stored keys and forks depend on it; change it only with a patch"
HISTORIES = Path(__file__).resolve().parents[1] / "histories"
PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)

# ---------------------------------------------------------------- pins

PINS: list[tuple[str, str]] = [
    (turn_scope(3), "t3."),
    (step_scope(0), "step-0"),
    (step_scope(12), "step-12"),
    (effect_scope(RUN_SCOPE, step_scope(1)), "step-1"),
    (effect_scope(turn_scope(2), step_scope(0)), "t2.step-0"),
    (effect_scope(turn_scope(1), "program"), "t1.program"),
    (step_call_id(RUN_SCOPE, 0, "call_15_0"), "0:call_15_0"),
    (step_call_id(turn_scope(1), 0, "call_1_0"), "t1.0:call_1_0"),
    (program_call_id(RUN_SCOPE, 0, 4), "p0-4"),
    (program_call_id(turn_scope(2), 1, 0), "t2.p1-0"),
    (engine_call_id(7, 0), "call_7_0"),
    (engine_call_id(1, 2, 3), "call_1_2_3"),
    (program_step(RUN_SCOPE, 3), "3"),
    (program_step(turn_scope(4), 0), "t4.0"),
    (program_run_key("code_mode-741f5589", "01a232f8-65aa", "0"), "code_mode-741f5589/01a232f8-65aa/0"),
    (program_run_key("monitor-1", "run-1", "scan"), "monitor-1/run-1/scan"),
    (chain_owner("session-a", "01a232f8-5a92"), "session-a/01a232f8-5a92"),
    (repl_key("session-a", "run-a"), "session-a/run-a/repl"),
    (legacy_repl_key("session-a"), "session-a/repl"),
    (effect_chain("tool_mode-1", "run-1"), "tool_mode-1/run-1"),
    (effect_chain("tool_mode-1", "run-1", "tenant-42/orders"), "scope:tenant-42/orders"),
    (history_effect_key(5), "history-5"),
    (pipeline_call_key("01a2-run", 2, "summarise"), "01a2-run:2:summarise"),
    (run_call_key("01a22d64-4561", program_call_id(RUN_SCOPE, 0, 0)), "01a22d64-4561:p0-0"),
    (run_call_key("01a22d64-4561", step_call_id(turn_scope(1), 0, "call_1_0")), "01a22d64-4561:t1.0:call_1_0"),
    (account_id("quota", "rec-b5935f"), "agentsteps-quota-rec-b5935f"),
    (account_id("tenant", "acme"), "agentsteps-tenant-acme"),
    (period_key("day", 1_796_083_199.5), "2026-11-30"),  # the last half second of the day, UTC
    (period_key("month", 1_796_083_200.0), "2026-12"),
    (lease_request_id("01a23335-8f32-7caa-93ca-32969687d7a5", 1), "01a23335-8f32-7caa-93ca-32969687d7a5/1"),
    (nudge_key("API-3", date(2026, 11, 30)), "nudge:API-3:2026-11-30"),
    (escalate_key("WEB-4"), "escalate:WEB-4"),
    (scan_call_id(10), "scan-10"),
    (named_object_key("snapshot-key-check.json"), "deployment/snapshot-key-check.json"),
    (scan_call_key("run-1", 10), "run-1:scan-10"),
    (fork_run_id("code-fork-source-75009151", 2, "49465f6c"), "code-fork-source-75009151-fork2-49465f6c"),
    (
        fork_session_id("session-fork-source-e405d8fe", 2, 1, "e7b268c7"),
        "session-fork-source-e405d8fe-fork2.1-e7b268c7",
    ),
]


@pytest.mark.parametrize(("built", "pinned"), PINS, ids=[p for _, p in PINS])
def test_each_builder_writes_the_pinned_string(built, pinned):
    assert built == pinned, PERSISTED


def test_an_effect_key_is_the_pinned_digest_of_its_parts():
    key = effect_key("tool_mode-1/run-1", "t2.step-0", "send", canonical_arguments('{"b": 1, "a": [2]}'), 1)
    assert key == "ak1-fad51995d3a2411968749d782c839217735a647f", PERSISTED
    assert is_effect_key(key)


def test_the_sessions_delegates_give_the_same_strings():
    assert session_owner("s", "r") == chain_owner("s", "r") == "s/r"
    assert repl_keys("s", "r") == repl_keys_of("s", "r") == ("s/r/repl", "s/repl")


# ---------------------------------------------------------------- what recorded runs wrote


def _payload_values(node: Any) -> Iterator[Any]:
    """Every decoded JSON payload in a recorded history, at any depth."""
    if isinstance(node, dict):
        if isinstance(node.get("metadata"), dict) and "data" in node:
            try:
                yield json.loads(base64.b64decode(node["data"]))
            except ValueError:
                return
            return
        for value in node.values():
            yield from _payload_values(value)
    elif isinstance(node, list):
        for value in node:
            yield from _payload_values(value)


def _fields(node: Any, names: set[str]) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for name, value in node.items():
            if name in names and isinstance(value, str) and value:
                yield name, value
            yield from _fields(value, names)
    elif isinstance(node, list):
        for value in node:
            yield from _fields(value, names)


def _recorded(file: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HISTORIES / file).read_text())
    return data


def _tool_calls(history: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for event in history["events"]:
        scheduled = event.get("activityTaskScheduledEventAttributes")
        if scheduled and scheduled["activityType"]["name"] == "tools.call":
            calls.append(json.loads(base64.b64decode(scheduled["input"]["payloads"][0]["data"])))
    return calls


@pytest.mark.parametrize(
    ("file", "call_id", "scope"),
    [
        ("release_2026_12_tool_mode.json", "call_1_0", step_scope(0)),
        ("release_2026_12_tool_mode.json", "call_3_0", step_scope(1)),
        ("release_2026_12_code_mode.json", "p0-3", "program"),
        ("release_2026_12_session_between_turns.json", "call_2_0", effect_scope(turn_scope(2), step_scope(0))),
        ("release_2026_12_pipeline.json", "update_ticket", step_scope(1)),
    ],
)
def test_a_recorded_effect_key_is_rebuilt_from_its_parts(file, call_id, scope):
    history = _recorded(file)
    started = history["events"][0]["workflowExecutionStartedEventAttributes"]
    call = next(c for c in _tool_calls(history) if c["call_id"] == call_id)
    chain = effect_chain(started["workflowId"], started["firstExecutionRunId"])
    rebuilt = effect_key(chain, scope, call["name"], canonical_arguments(call["arguments"]), 0)
    assert rebuilt == call["idempotency_key"], PERSISTED


def _an_effect_key(key: str) -> object:
    """An effect key, a monitor's tracker key, or a run call key (releases before effect keys) of a call."""
    if is_effect_key(key) or parse_nudge_key(key) or parse_escalate_key(key):
        return True
    run_call = parse_run_call_key(key)
    if run_call is None:
        return False
    call = run_call[1]
    return parse_step_call_id(call) or parse_program_call_id(call) or parse_scan_call_id(call) is not None


_PARSERS: dict[str, Callable[[str], object]] = {
    "approval_id": lambda s: parse_step_call_id(s) or parse_program_call_id(s),
    "owner": parse_chain_owner,
    "chain": parse_chain_owner,
    "source_owner": parse_chain_owner,
    "store_for": parse_chain_owner,
    "request_id": parse_lease_request_id,
    "tenant_account": parse_account_id,
    "idempotency_key": _an_effect_key,
    "tool_call_id": parse_engine_call_id,
}


def test_every_id_the_recorded_histories_hold_parses():
    seen: dict[str, set[str]] = {name: set() for name in _PARSERS}
    for file in sorted(HISTORIES.glob("*.json")):
        for payload in _payload_values(json.loads(file.read_text())):
            for name, value in _fields(payload, set(_PARSERS)):
                seen[name].add(value)
                assert _PARSERS[name](value), f"{file.name}: {name} {value!r} does not parse; {PERSISTED}"
    assert all(seen[name] for name in ("approval_id", "owner", "request_id", "idempotency_key")), seen
    assert {"p0-0", "t1.0:call_1_0"} <= seen["approval_id"]


def test_recorded_fork_workflow_ids_parse_to_their_source_and_step():
    ids = {e["workflowExecutionStartedEventAttributes"]["workflowId"] for e in _started_events()}
    assert parse_fork_id("code-fork-source-75009151-fork2-49465f6c") == ForkId(
        "code-fork-source-75009151", 2, "49465f6c"
    )
    assert "code-fork-source-75009151-fork2-49465f6c" in ids
    assert parse_fork_id("session-fork-source-e405d8fe-fork2.1-e7b268c7") == ForkId(
        "session-fork-source-e405d8fe", 1, "e7b268c7", turn=2
    )
    assert "session-fork-source-e405d8fe-fork2.1-e7b268c7" in ids


def _started_events() -> Iterator[dict[str, Any]]:
    for file in sorted(HISTORIES.glob("*.json")):
        yield json.loads(file.read_text())["events"][0]


# ---------------------------------------------------------------- round trips

any_text = st.text()
awkward = st.text(st.sampled_from("0123456789-:./_ptscope\n٣é") | st.characters(), min_size=1)
no_slash = awkward.filter(lambda s: "/" not in s)
numbers = st.integers(min_value=0, max_value=10**12)
scopes = st.one_of(st.just(RUN_SCOPE), numbers.map(turn_scope))
hex8 = st.text("0123456789abcdef", min_size=8, max_size=8)


@PROPERTY
@given(numbers)
def test_scopes_round_trip(n):
    assert parse_turn_scope(turn_scope(n)) == n
    assert parse_step_scope(step_scope(n)) == n
    assert parse_history_effect_key(history_effect_key(n)) == n
    assert parse_scan_call_id(scan_call_id(n)) == n


@PROPERTY
@given(scopes, numbers, any_text)
def test_a_step_call_round_trips_whatever_the_models_call_id(scope, step, call_id):
    assert parse_step_call_id(step_call_id(scope, step, call_id)) == StepCall(scope, step, call_id)


@PROPERTY
@given(scopes, numbers, numbers)
def test_a_program_call_and_its_program_step_round_trip(scope, step, call):
    assert parse_program_call_id(program_call_id(scope, step, call)) == ProgramCall(scope, step, call)
    assert parse_program_step(program_step(scope, step)) == (scope, step)


@PROPERTY
@given(scopes, st.one_of(numbers.map(step_scope), st.just("program")))
def test_an_effect_scope_round_trips(scope, logical):
    assert parse_effect_scope(effect_scope(scope, logical)) == (scope, logical)


@PROPERTY
@given(numbers, numbers, numbers)
def test_an_engine_call_id_round_trips(turn, index, n):
    assert parse_engine_call_id(engine_call_id(turn, index, n)) == EngineCallId(turn, index, n)


@PROPERTY
@given(awkward, no_slash, no_slash)
def test_chain_owners_and_program_keys_round_trip_with_slashes_in_the_workflow_id(workflow_id, run_id, step):
    assert parse_chain_owner(chain_owner(workflow_id, run_id)) == ChainOwner(workflow_id, run_id)
    assert parse_program_run_key(program_run_key(workflow_id, run_id, step)) == ProgramKey(workflow_id, run_id, step)
    assert owned_by_workflow(chain_owner(workflow_id, run_id), workflow_id)
    assert parse_effect_chain(effect_chain(workflow_id, run_id, None)) == (
        ChainOwner(workflow_id, run_id) if not workflow_id.startswith("scope:") else workflow_id[6:] + "/" + run_id
    )


@PROPERTY
@given(awkward, awkward)
def test_a_key_scope_chain_round_trips(workflow_id, key_scope):
    assert parse_effect_chain(effect_chain(workflow_id, "run", key_scope)) == key_scope


@PROPERTY
@given(awkward.filter(lambda s: ":" not in s), numbers, awkward)
def test_run_call_keys_round_trip(run_id, step, call):
    assert parse_run_call_key(run_call_key(run_id, call)) == (run_id, call)
    assert parse_pipeline_call_key(pipeline_call_key(run_id, step, call)) == (run_id, step, call)


@PROPERTY
@given(st.sampled_from(["quota", "tenant"]), awkward, awkward, numbers)
def test_quota_ids_round_trip(kind, name, run_id, n):
    assert parse_account_id(account_id(kind, name)) == (kind, name)
    assert parse_lease_request_id(lease_request_id(run_id, n)) == (run_id, n)


@PROPERTY
@given(awkward, st.dates(), awkward, numbers)
def test_the_monitors_keys_round_trip(issue, day, run_id, call):
    assert parse_nudge_key(nudge_key(issue, day)) == (issue, day)
    assert parse_escalate_key(escalate_key(issue)) == issue
    assert parse_scan_call_key(scan_call_key(run_id, call)) == (run_id, call)


@PROPERTY
@given(st.sampled_from(["day", "month"]), st.floats(min_value=0, max_value=2**33))
def test_a_period_key_round_trips_to_the_period_holding_the_moment(period, now):
    key = period_key(period, now)
    parsed = parse_period_key(key)
    assert parsed is not None and parsed[0] == period
    start = datetime.combine(parsed[1], time(), UTC).timestamp()
    assert start <= now and period_key(period, start) == key


@PROPERTY
@given(no_slash)
def test_a_named_object_key_round_trips(name):
    assert parse_named_object_key(named_object_key(name)) == name


@PROPERTY
@given(awkward, numbers, numbers, hex8)
def test_fork_ids_round_trip_even_for_a_fork_of_a_fork(source, turn, step, tag):
    assert parse_fork_id(fork_run_id(source, step, tag)) == ForkId(source, step, tag)
    assert parse_fork_id(fork_session_id(source, turn, step, tag)) == ForkId(source, step, tag, turn=turn)
    twice = fork_run_id(fork_run_id(source, step, tag), step + 1, tag)
    assert parse_fork_id(twice) == ForkId(fork_run_id(source, step, tag), step + 1, tag)


# ---------------------------------------------------------------- hostile input

_REBUILD: list[tuple[Callable[[str], Any], Callable[[Any], str]]] = [
    (parse_turn_scope, turn_scope),
    (parse_step_scope, step_scope),
    (parse_effect_scope, lambda p: effect_scope(*p)),
    (parse_step_call_id, lambda p: step_call_id(p.scope, p.step, p.call_id)),
    (parse_program_call_id, lambda p: program_call_id(p.scope, p.step, p.call)),
    (parse_engine_call_id, lambda p: engine_call_id(p.turn, p.index, p.n)),
    (parse_program_step, lambda p: program_step(*p)),
    (parse_chain_owner, lambda p: chain_owner(p.workflow_id, p.first_run_id)),
    (parse_program_run_key, lambda p: program_run_key(p.workflow_id, p.chain_run_id, p.step)),
    (parse_history_effect_key, history_effect_key),
    (parse_run_call_key, lambda p: run_call_key(*p)),
    (parse_pipeline_call_key, lambda p: pipeline_call_key(*p)),
    (parse_account_id, lambda p: account_id(*p)),
    (parse_lease_request_id, lambda p: lease_request_id(*p)),
    (parse_period_key, lambda p: p[1].isoformat() if p[0] == "day" else p[1].isoformat()[:7]),
    (parse_nudge_key, lambda p: nudge_key(*p)),
    (parse_escalate_key, escalate_key),
    (parse_named_object_key, named_object_key),
    (parse_scan_call_id, scan_call_id),
    (parse_scan_call_key, lambda p: scan_call_key(*p)),
    (
        parse_fork_id,
        lambda p: (
            fork_run_id(p.source, p.at_step, p.suffix)
            if p.turn is None
            else fork_session_id(p.source, p.turn, p.at_step, p.suffix)
        ),
    ),
]

_NEAR_MISSES = st.one_of(
    st.text(),
    st.text(st.sampled_from("0123456789tpscan_-:./\n٣ fork history nudge escalate agentsteps-quota-")),
    st.sampled_from([p for _, p in PINS]).flatmap(
        lambda pinned: st.tuples(st.integers(0, len(pinned)), st.text(max_size=3)).map(
            lambda cut: pinned[: cut[0]] + cut[1] + pinned[cut[0] :]
        )
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(_NEAR_MISSES)
def test_a_parser_returns_none_or_the_parts_of_exactly_that_string(text):
    for parse, build in _REBUILD:
        parts = parse(text)
        assert parts is None or build(parts) == text, (parse.__name__, text, parts)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(_NEAR_MISSES)
def test_no_approval_id_is_both_a_step_call_and_a_program_call(text):
    assert parse_step_call_id(text) is None or parse_program_call_id(text) is None


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_turn_scope, ""),  # the run scope is no turn
        (parse_turn_scope, "t03."),  # a leading zero would rebuild as t3.
        (parse_turn_scope, "t٣."),  # a digit of another script
        (parse_turn_scope, "t3.\n"),  # `$` would match before a final newline
        (parse_turn_scope, "t-1."),
        (parse_step_scope, "step-"),
        (parse_step_call_id, "t1..0:x"),
        (parse_step_call_id, "0call_1"),
        (parse_step_call_id, "00:x"),
        (parse_program_call_id, "p0-"),
        (parse_program_call_id, "p0-1-2"),
        (parse_program_call_id, "t1p0-1"),
        (parse_engine_call_id, "call_1_0_0"),  # n = 0 is written without a suffix
        (parse_engine_call_id, "call_1"),
        (parse_chain_owner, "no-slash"),
        (parse_chain_owner, "wf/"),
        (parse_chain_owner, "/run"),
        (parse_program_run_key, "wf/run"),
        (parse_program_run_key, "wf//0"),
        (parse_history_effect_key, "history-01"),
        (parse_run_call_key, ":p0-0"),
        (parse_run_call_key, "run:"),
        (parse_pipeline_call_key, ":1:c"),
        (parse_pipeline_call_key, "run:x:c"),
        (parse_account_id, "agentsteps-quota-"),
        (parse_account_id, "agentsteps-other-x"),
        (parse_lease_request_id, "run/"),
        (parse_lease_request_id, "/1"),
        (parse_lease_request_id, "run/1x"),
        (parse_nudge_key, "nudge::2026-11-30"),
        (parse_nudge_key, "nudge:API-3:2026-02-30"),  # no such day
        (parse_nudge_key, "nudge:API-3:2026-11-30T00:00"),
        (parse_nudge_key, "nudge:API-3:２０２６-11-30"),
        (parse_escalate_key, "escalate:"),
        (parse_period_key, "2026-13"),
        (parse_period_key, "2026-02-29"),
        (parse_period_key, "2026-1"),
        (parse_period_key, "2026-11-30\n"),
        (parse_named_object_key, "deployment/"),
        (parse_named_object_key, "deployment/a/b"),
        (parse_named_object_key, "snapshot-key-check.json"),
        (parse_scan_call_key, "scan-1"),
        (parse_scan_call_key, ":scan-1"),
        (parse_fork_id, "my-chosen-fork-id"),
        (parse_fork_id, "src-fork2-49465F6C"),  # a tag is lowercase hex
        (parse_fork_id, "-fork2-49465f6c"),
        (parse_effect_scope, "t1.step-"),
        (parse_effect_scope, "programme"),
        (parse_effect_chain, "scope:"),
    ],
)
def test_a_malformed_id_parses_to_none(parse, text):
    assert parse(text) is None


def test_an_effect_key_shape_is_exact():
    good = "ak1-" + "0" * 40
    assert is_effect_key(good)
    assert not any(is_effect_key(s) for s in [good[:-1], good + "0", good.upper(), "ak2-" + "0" * 40, good + "\n"])


def test_a_workflow_owns_only_its_own_chains_never_a_longer_ids():
    assert owned_by_workflow("team/a/run-1", "team/a")
    assert not owned_by_workflow("team/a/run-1", "team")  # a prefix of the id is another workflow
    assert not owned_by_workflow("team/", "team")
    assert not owned_by_workflow("", "team")


def test_the_known_ambiguities_are_read_as_documented():
    # A key scope chain and a workflow chain whose id starts with "scope:" are one string: read as a key scope.
    assert effect_chain("scope:x", "run") == effect_chain("any", "run", "x/run")
    assert parse_effect_chain("scope:x/run") == "x/run"
    # The legacy REPL key of session "a/b" is the current REPL key of session "a" on first run "b".
    assert legacy_repl_key("a/b") == repl_key("a", "b")


def test_an_approval_notices_delivery_id_is_pinned():
    from agentsteps.contracts.persisted_ids import approval_delivery_id

    assert approval_delivery_id("refunds-7", "r-1", "0:call_15_0", "waiting") == "refunds-7/r-1/0:call_15_0/waiting"
