"""A session's carried state has one owner (``SessionRecord``) and a stated shape: its verbs, without a server."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentsteps.contracts import Message, ToolSchema
from agentsteps.contracts.approvals import ApprovalRecord
from agentsteps.contracts.code.program import ReplMemory, VariableInfo
from agentsteps.contracts.llm.conversation import ConversationRef
from agentsteps.contracts.llm.request import Usage
from agentsteps.contracts.llm.tool_catalog import ToolCatalogRef
from agentsteps.contracts.session import (
    EFFECTS_KEPT_PER_TURN,
    SessionCarry,
    SessionFork,
    SessionForkBound,
    SessionPoint,
    TurnCheckpoint,
    TurnSummary,
)
from agentsteps.contracts.spec import EffectRecord, RunStatus
from agentsteps.workflows.session_state import SessionRecord

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _point(n: int, *, code: bool = False) -> SessionPoint:
    """The point after turn ``n``: its own stored head, one unstored answer, and (code mode) its variables."""
    repl = ReplMemory(key="s/run/repl", variables=[VariableInfo(name=f"v{n}", type="int")]) if code else None
    return SessionPoint(
        conversation=ConversationRef(sha256=f"{n:064x}", length=2 * n + 1),
        messages=(Message(role="assistant", content=f"answer {n}"),),
        repl=repl,
    )


def _effect(turn: int, index: int = 0) -> EffectRecord:
    return EffectRecord(key=f"t{turn}.step-1.{index}", tool="send_email", arguments=f'{{"n": {index}}}', content="ok")


def _summary(turn: int, status: RunStatus = "completed", *, steps: int = 2, tokens: int = 10) -> TurnSummary:
    return TurnSummary(
        turn=turn,
        input=f"question {turn}",
        status=status,
        steps=steps,
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
        started_at=_at(turn),
        finished_at=_at(turn),
        violations=1,
        cost_usd=0.5,
    )


def _record(turns_kept: int = 100) -> SessionRecord:
    return SessionRecord.new(T0, turns_kept=turns_kept)


def _commit(record: SessionRecord, turn: int, effects: list[EffectRecord] | None = None) -> None:
    record.commit_turn(_summary(turn), _point(turn), effects or [], now=_at(turn))


def test_a_new_session_has_not_started_its_conversation():
    record = _record()
    assert record.next_turn == 1 and record.turns_done == 0
    assert record.point == SessionPoint() and not record.point.started
    assert record.rewind_targets() == [0]


def test_a_committed_turn_moves_the_point_and_checkpoints_stay_within_turns_kept():
    record = _record(turns_kept=2)
    for turn in (1, 2, 3):
        _commit(record, turn, [_effect(turn)])

    assert record.point == _point(3) and record.point.started
    assert record.turns_done == 3 and record.next_turn == 4
    assert [c.turn for c in record.fork_source("s/run").checkpoints] == [2, 3]
    assert [c.point for c in record.fork_source("s/run").checkpoints] == [_point(2), _point(3)]
    assert [c.effects for c in record.fork_source("s/run").checkpoints] == [[_effect(2)], [_effect(3)]]
    assert [t.turn for t in record.turns] == [2, 3]
    assert record.rewind_targets() == [0, 2, 3]
    # The totals count every turn, kept or not.
    assert (record.steps, record.violations, record.cost_usd) == (6, 3, 1.5)
    assert record.usage.total_tokens == 30
    assert record.last_activity == _at(3) and record.created_at == T0


def test_a_failed_turn_leaves_the_point_and_carries_its_effects_as_untold():
    record = _record()
    _commit(record, 1)
    effects = [_effect(2, i) for i in range(EFFECTS_KEPT_PER_TURN + 3)]

    record.fail_turn(_summary(2, "failed"), effects, now=_at(2))

    assert record.point == _point(1)
    [untold] = record.untold_effects
    assert (untold.turn, untold.status, untold.effects, untold.more) == (2, "failed", effects[:-3], 3)
    # The failed turn is a checkpoint at the point it left unchanged, with everything it did.
    checkpoint = record.fork_source("s/run").checkpoints[-1]
    assert (checkpoint.turn, checkpoint.point, checkpoint.effects) == (2, _point(1), effects)
    assert record.turns_done == 2 and record.turns[-1].status == "failed"


def test_a_turn_that_ended_without_effects_has_nothing_untold():
    record = _record()
    _commit(record, 1)
    record.fail_turn(_summary(2, "cancelled"), [], now=_at(2))
    assert record.untold_effects == [] and record.point == _point(1)


def test_a_completed_turn_drops_the_untold_effects_its_conversation_told():
    record = _record()
    record.fail_turn(_summary(1, "cancelled"), [_effect(1)], now=_at(1))
    record.fail_turn(_summary(2, "failed"), [_effect(2)], now=_at(2))
    assert [u.turn for u in record.untold_effects] == [1, 2]

    _commit(record, 3)

    assert record.untold_effects == [] and record.point == _point(3)


def test_a_rewind_to_a_kept_turn_restores_its_point_and_records_the_undone_effects():
    record = _record()
    code_point = _point(1, code=True)
    record.commit_turn(_summary(1), code_point, [_effect(1)], now=_at(1))
    _commit(record, 2, [_effect(2)])
    _commit(record, 3, [_effect(3, 0), _effect(3, 1)])

    done = record.rewind(1, now=_at(10))

    assert record.point == code_point and record.variables == [VariableInfo(name="v1", type="int")]
    assert record.rewind_targets() == [0, 1]
    assert record.undone_effects == [_effect(2), _effect(3, 0), _effect(3, 1)]
    assert record.rewinds == [done]
    assert (done.to_turn, done.at, [t.turn for t in done.undone]) == (1, _at(10), [2, 3])
    assert done.effects == record.undone_effects
    # Turn numbers go on counting: no effect key or audit line is reused.
    assert record.next_turn == 4 and record.last_activity == _at(10)


def test_a_rewind_to_zero_starts_the_conversation_again_and_keeps_earlier_undone_effects():
    record = _record()
    _commit(record, 1, [_effect(1)])
    _commit(record, 2, [_effect(2)])
    record.rewind(1, now=_at(5))

    record.rewind(0, now=_at(6))

    assert record.point == SessionPoint() and not record.point.started
    assert record.rewind_targets() == [0]
    assert record.undone_effects == [_effect(2), _effect(1)]
    assert [r.to_turn for r in record.rewinds] == [1, 0]


def _fork(turn: int) -> SessionFork:
    return SessionFork(
        session_id="source",
        owner="source/run1",
        turn=turn,
        at_step=1,
        conversation=ConversationRef(sha256="a" * 64, length=5, claim={"owner": "source/run1"}),
        messages=[Message(role="assistant", content="source answer")],
        repl=ReplMemory(key="source/run1/repl"),
        turn_messages=[Message(role="assistant", content="step 0")],
        effects=[_effect(1), _effect(2)],
    )


def test_a_fork_starts_at_the_sources_point_with_its_turn_numbering():
    fork = _fork(turn=3)
    bound = SessionForkBound(
        conversation=ConversationRef(sha256="b" * 64, length=5, claim={"owner": "fork/run1"}),
        repl=ReplMemory(key="fork/run1/repl"),
    )
    record = _record()

    record.start_fork(fork)
    # Before its state is bound: numbered as the source, told of the source's effects.
    assert record.turns_done == 2 and record.next_turn == 3
    assert record.undone_effects == fork.effects and record.forked_from == "source"

    record.take_fork(fork, bound)

    assert record.point == SessionPoint(conversation=bound.conversation, messages=fork.point.messages, repl=bound.repl)
    # The state it starts from is a turn it can rewind to, and be forked at.
    assert record.rewind_targets() == [0, 2]
    assert record.fork_source("fork/run1").checkpoints == [TurnCheckpoint.at(2, record.point)]


def test_carry_over_hands_the_next_run_the_latest_decisions_and_tools():
    record = _record()
    _commit(record, 1)
    earlier = ApprovalRecord(approval_id="a1", tool="send_email", outcome="approved", decided_at=_at(1))
    later = ApprovalRecord(approval_id="a2", tool="send_email", outcome="rejected", decided_at=_at(2))
    tools = [ToolSchema(name="send_email", description="send", parameters={"type": "object"})]
    ref = ToolCatalogRef(sha256="c" * 64, count=1)

    record.count_continue_as_new()
    carry = record.carry_over(decided=[earlier, later], chain="s/run1", tools=tools, tools_ref=ref)

    assert (carry.decided, carry.chain, carry.tools, carry.tools_ref, carry.continued) == (
        [earlier, later],
        "s/run1",
        tools,
        ref,
        1,
    )
    # The next run takes it as it was handed: same point, same decisions.
    following = SessionRecord(SessionCarry.model_validate_json(carry.model_dump_json()), turns_kept=100)
    assert following.point == _point(1) and following.decided == [earlier, later]
    assert (following.tools, following.tools_ref, following.continued) == (tools, ref, 1)

    # A run that may not carry decisions yet (before APPROVALS_CARRIED_PATCH) hands on the ones it was given.
    following.count_continue_as_new()
    again = following.carry_over(decided=None, chain="s/run1", tools=None, tools_ref=None)
    assert again.decided == [earlier, later] and again.tools is None and again.continued == 2


def test_a_point_is_one_frozen_value():
    point = _point(1)
    with pytest.raises(ValidationError):
        point.repl = None  # type: ignore[misc]
    assert point == _point(1) and point != _point(2)
    assert TurnCheckpoint.at(1, point).point == point


CARRY_FIELDS = [
    "turns_done",
    "conversation",
    "messages",
    "turns",
    "usage",
    "created_at",
    "last_activity",
    "continued",
    "repl",
    "decided",
    "untold_effects",
    "steps",
    "violations",
    "cost_usd",
    "tools",
    "tools_ref",
    "chain",
    "checkpoints",
    "rewinds",
    "undone_effects",
    "forked_from",
]


def test_the_carried_state_keeps_its_wire_shape():
    """Running sessions and recorded histories carry these fields, in this order: the point is not one of them."""
    record = _record()
    _commit(record, 1, [_effect(1)])
    carry = record.carry_over(decided=None, chain="s/run1", tools=None, tools_ref=None)
    assert list(SessionCarry.model_fields) == CARRY_FIELDS
    assert list(carry.model_dump(mode="json")) == [f for f in CARRY_FIELDS if f != "tools_ref"]
    checkpoint = carry.model_dump(mode="json")["checkpoints"][0]
    assert list(checkpoint) == ["turn", "conversation", "messages", "repl", "effects"]
    assert checkpoint["messages"][0]["content"] == "answer 1" and checkpoint["effects"][0]["key"] == "t1.step-1.0"


def _writes_to_a_carry(path: Path) -> list[str]:
    """Assignments to a field of something named ``carry``, ``_carry`` or ``carried`` (``self.carry.x = ...``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Attribute) and isinstance(leaf.ctx, ast.Store):
                    owner = leaf.value
                    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                    if name in ("carry", "_carry", "carried"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _package_files() -> list[Path]:
    tops = [p for p in ROOT.iterdir() if not p.name.startswith(".") and p.name not in ("tests", "bench", "docs")]
    return sorted(f for top in tops for f in ([top] if top.suffix == ".py" else top.rglob("*.py")))


def test_only_the_session_record_writes_the_carried_state():
    owner = ROOT / "workflows" / "session_state.py"
    assert _writes_to_a_carry(owner), "the scan finds the record's own writes"
    writes = [w for path in _package_files() if path != owner for w in _writes_to_a_carry(path)]
    assert writes == [], "the carried state changes only through SessionRecord's verbs"
