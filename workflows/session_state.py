"""A session's carried state and the only code that changes it: ``SessionRecord``.

A session carries one ``SessionCarry`` from run to run (continue-as-new). Its
JSON is fixed: running sessions and recorded histories hold it. The workflow
reads it here and changes it only through these verbs, so each rule about the
session's state is written once:

- ``start_fork`` (a fork session's first run): turn numbers go on from the
  source's, whose effects become this session's undone ones.
- ``take_fork`` (the fork's state bound to it by ``session.fork``): the point
  is the source's before the forked turn, the first turn a rewind can go to.
- ``commit_turn`` (a turn completed): the point moves to the turn's and the
  untold effects are dropped, since its conversation says so.
- ``fail_turn`` (a turn failed or was cancelled): the point stays where it
  was; the turn's effects are carried as untold until a turn completes.
- Either way the turn is a checkpoint (its point after it, its effects; the
  last ``turns_kept``) and counts in the totals.
- ``rewind`` (the ``rewind`` Update): the point goes back to a kept
  checkpoint; the later ones are dropped, their effects recorded as undone so
  every later turn is told of them and never repeats one.
- ``count_continue_as_new`` then ``carry_over`` (continue-as-new): the count,
  then at the last moment the latest decisions, the chain and the tools: the
  carry the next run takes.

Pure: no Temporal here. The workflow passes the time (``workflow.now()``),
so the verbs are tested without a server (``tests/workflows/test_session_state.py``).
"""

from __future__ import annotations

from datetime import datetime

from ..contracts.approvals import ApprovalRecord
from ..contracts.code.program import VariableInfo
from ..contracts.llm.request import Usage
from ..contracts.llm.tool_catalog import ToolCatalogRef
from ..contracts.llm.tools import ToolSchema
from ..contracts.session import (
    EFFECTS_KEPT_PER_TURN,
    UNTOLD_TURNS_KEPT,
    ForkSource,
    Rewind,
    SessionCarry,
    SessionFork,
    SessionForkBound,
    SessionPoint,
    TurnCheckpoint,
    TurnSummary,
    UntoldEffects,
)
from ..contracts.spec import EffectRecord


class SessionRecord:
    """One session's carried state: where its conversation stands (``point``), its turns, checkpoints,
    rewinds, effects and totals. Read through its properties; changed only by its verbs."""

    def __init__(self, carry: SessionCarry, *, turns_kept: int) -> None:
        self._carry = carry
        self._turns_kept = turns_kept
        """How many turn summaries and checkpoints are kept (``SessionConfig.turns_kept``)."""

    @classmethod
    def new(cls, now: datetime, *, turns_kept: int) -> SessionRecord:
        """A session's first run: nothing said yet."""
        return cls(SessionCarry(created_at=now, last_activity=now), turns_kept=turns_kept)

    # ------------------------------------------------------------------ reads

    @property
    def point(self) -> SessionPoint:
        return self._carry.point

    @property
    def turns_done(self) -> int:
        """Turns finished (completed or failed), counting on from the source's in a fork."""
        return self._carry.turns_done

    @property
    def next_turn(self) -> int:
        return self._carry.turns_done + 1

    @property
    def turns(self) -> list[TurnSummary]:
        """The last ``turns_kept`` turns' summaries (the ``turns`` query)."""
        return list(self._carry.turns)

    @property
    def usage(self) -> Usage:
        return self._carry.usage

    @property
    def steps(self) -> int:
        return self._carry.steps

    @property
    def violations(self) -> int:
        return self._carry.violations

    @property
    def cost_usd(self) -> float:
        return self._carry.cost_usd

    @property
    def created_at(self) -> datetime:
        return self._carry.created_at

    @property
    def last_activity(self) -> datetime:
        return self._carry.last_activity

    @property
    def continued(self) -> int:
        return self._carry.continued

    @property
    def variables(self) -> list[VariableInfo]:
        """Code mode: the variables the REPL keeps."""
        repl = self._carry.repl
        return repl.variables if repl else []

    @property
    def decided(self) -> list[ApprovalRecord]:
        """The approval decisions the previous run carried over."""
        return list(self._carry.decided)

    @property
    def tools(self) -> list[ToolSchema] | None:
        """The tool schemas the previous run carried over (None: describe them at the next turn)."""
        return self._carry.tools

    @property
    def tools_ref(self) -> ToolCatalogRef | None:
        return self._carry.tools_ref

    @property
    def untold_effects(self) -> list[UntoldEffects]:
        """Effects of failed or cancelled turns that the conversation does not hold: the next turn is told."""
        return list(self._carry.untold_effects)

    @property
    def undone_effects(self) -> list[EffectRecord]:
        """Effects of undone turns (and of a fork's source): every later turn is told, and never repeats one."""
        return list(self._carry.undone_effects)

    @property
    def forked_from(self) -> str | None:
        return self._carry.forked_from

    @property
    def rewinds(self) -> list[Rewind]:
        return list(self._carry.rewinds)

    def rewind_targets(self) -> list[int]:
        """The turns ``rewind`` can go back to: 0 (a fresh session's state), then each kept turn still in effect."""
        return [0, *(c.turn for c in self._carry.checkpoints)]

    def fork_source(self, owner: str) -> ForkSource:
        """What a fork of one of this session's turns starts from (the ``fork_source`` query)."""
        return ForkSource(
            owner=owner,
            checkpoints=list(self._carry.checkpoints),
            undone_effects=list(self._carry.undone_effects),
            untold_effects=list(self._carry.untold_effects),
            rewinds=list(self._carry.rewinds),
        )

    # ------------------------------------------------------------------ forks

    def start_fork(self, fork: SessionFork) -> None:
        """A fork session, before its first command: its first turn is the forked one (numbers go on from the
        source's), and what the source did is done here too, told to every turn and never repeated."""
        self._carry.turns_done = fork.turn - 1
        self._carry.undone_effects = list(fork.effects)
        self._carry.forked_from = fork.session_id

    def take_fork(self, fork: SessionFork, bound: SessionForkBound) -> None:
        """The source's point before the forked turn, now bound to this session: where it goes on from, and a
        turn it can rewind to (and be forked at) too."""
        point = SessionPoint(conversation=bound.conversation, messages=tuple(fork.messages), repl=bound.repl)
        self._move_to(point)
        self._carry.checkpoints = [TurnCheckpoint.at(fork.turn - 1, point)]

    # ------------------------------------------------------------------ turns

    def commit_turn(
        self, summary: TurnSummary, point: SessionPoint, effects: list[EffectRecord], *, now: datetime
    ) -> None:
        """A completed turn: the session goes on from ``point``; the untold effects are dropped, since the
        turn's conversation told them."""
        self._move_to(point)
        self._carry.untold_effects = []
        self._end_turn(summary, effects, now)

    def fail_turn(self, summary: TurnSummary, effects: list[EffectRecord], *, now: datetime) -> None:
        """A turn that did not complete (failed, cancelled): the point stays where it was, but what the turn did
        happened, so its effects are carried as untold until a completed turn's conversation says so."""
        if effects:
            untold = UntoldEffects(
                turn=summary.turn,
                status=summary.status,
                effects=effects[:EFFECTS_KEPT_PER_TURN],
                more=max(0, len(effects) - EFFECTS_KEPT_PER_TURN),
            )
            self._carry.untold_effects = [*self._carry.untold_effects, untold][-UNTOLD_TURNS_KEPT:]
        self._end_turn(summary, effects, now)

    def _end_turn(self, summary: TurnSummary, effects: list[EffectRecord], now: datetime) -> None:
        carry = self._carry
        checkpoint = TurnCheckpoint.at(summary.turn, carry.point, effects)
        carry.checkpoints = [*carry.checkpoints, checkpoint][-self._turns_kept :]
        carry.turns_done = summary.turn
        carry.usage = carry.usage + summary.usage
        carry.steps += summary.steps
        carry.violations += summary.violations
        carry.cost_usd += summary.cost_usd
        carry.turns = [*carry.turns, summary][-self._turns_kept :]
        carry.last_activity = now

    # ------------------------------------------------------------------ rewind

    def rewind(self, to_turn: int, *, now: datetime) -> Rewind:
        """Go back to the point after kept turn ``to_turn`` (0: before the first turn). The later turns are
        undone but their effects are not: they are recorded (``undone_effects``) so every later turn is told
        and never repeats one. Turn numbers go on counting, so no effect key or audit line is reused."""
        carry = self._carry
        kept = [c for c in carry.checkpoints if c.turn <= to_turn]
        undone = [c for c in carry.checkpoints if c.turn > to_turn]
        back = kept[-1] if kept else TurnCheckpoint(turn=0)
        effects = [e for c in undone for e in c.effects]
        undone_turns = {c.turn for c in undone}
        record = Rewind(
            to_turn=to_turn, at=now, undone=[t for t in carry.turns if t.turn in undone_turns], effects=effects
        )
        carry.rewinds = [*carry.rewinds, record]
        carry.undone_effects = [*carry.undone_effects, *effects]
        self._move_to(back.point)
        carry.checkpoints = kept
        carry.last_activity = now
        return record

    # ------------------------------------------------------------------ continue-as-new

    def count_continue_as_new(self) -> None:
        """The session is about to continue-as-new (counted as soon as it decides to)."""
        self._carry.continued += 1

    def carry_over(
        self,
        *,
        decided: list[ApprovalRecord] | None,
        chain: str,
        tools: list[ToolSchema] | None,
        tools_ref: ToolCatalogRef | None,
    ) -> SessionCarry:
        """The carry the next run takes, with what the running one knows last: the latest approval decisions
        (None: keep the ones carried in, as releases before carrying them did), the chain it belongs to
        (``session_owner``) and the tool schemas with their catalog."""
        if decided is not None:
            self._carry.decided = decided
        self._carry.chain = chain
        self._carry.tools, self._carry.tools_ref = tools, tools_ref
        return self._carry

    def _move_to(self, point: SessionPoint) -> None:
        """The one place the three move, always together."""
        self._carry.conversation, self._carry.messages, self._carry.repl = (
            point.conversation,
            list(point.messages),
            point.repl,
        )


__all__ = ["SessionRecord"]
