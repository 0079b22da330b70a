"""SessionWorkflow's input, update, query and result types.

A session is one long-lived conversation between a caller and one
``AgentSpec``: each turn is the ``turn`` Update, and the session ends on the
``close`` Update or after ``idle_timeout_seconds`` without a turn. New fields
always get defaults so histories recorded by older versions still replay.
"""

from __future__ import annotations

import hashlib
import unicodedata
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .approvals import ApprovalRecord, PendingApproval
from .code.program import ReplMemory, VariableInfo
from .json_schema import json_path
from .llm.conversation import ConversationRef
from .llm.messages import Message
from .llm.request import Usage
from .llm.tool_catalog import ToolCatalogRef
from .llm.tools import ToolSchema
from .persisted_ids import chain_owner, repl_keys_of
from .quotas.wire import QuotaPlan
from .spec import AgentResult, AgentSpec, EffectRecord, RunStatus

DAY_SECONDS = 86_400.0
MAX_TURN_INPUT_CHARS = 32_000
"""Default limit on one turn's input; a session may lower or raise it (up to 1,000,000)."""
_PREVIEW_CHARS = 200


class SessionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    idle_timeout_seconds: float = Field(default=7 * DAY_SECONDS, gt=0)
    """The session closes itself after this long without a turn (default 7 days)."""
    max_input_chars: int = Field(default=MAX_TURN_INPUT_CHARS, ge=1, le=1_000_000)
    continue_after_events: int = Field(default=10_000, ge=100)
    """Continue-as-new between turns once history has this many events (or Temporal suggests it)."""
    continue_after_bytes: int = Field(default=8 * 1024 * 1024, ge=64 * 1024)
    """... or once history is this many bytes."""
    turns_kept: int = Field(default=100, ge=1, le=10_000)
    """How many turn summaries the ``turns`` query keeps (older ones are counted, not listed)."""
    stream_tokens: bool = False
    """Stream the model's answers: text arrives on the progress stream (``token`` events, about every
    100 ms) while the call runs. Each batch is a signal in history, so it is off unless asked for
    (``agentsteps chat`` asks for it)."""


class UntoldEffects(BaseModel):
    """Side effects of a turn that failed or was cancelled: they happened, but the conversation (rolled
    back to before the turn) does not say so. The next turn's model is told, so a repeated request does
    not repeat them unawares."""

    turn: int
    status: RunStatus
    """``failed`` or ``cancelled``."""
    effects: list[EffectRecord]
    more: int = 0
    """Effects past the ones kept here (``EFFECTS_KEPT_PER_TURN``)."""


EFFECTS_KEPT_PER_TURN = 50
UNTOLD_TURNS_KEPT = 20


class TurnSummary(BaseModel):
    """One line of the ``turns`` query: what was asked and how it ended."""

    turn: int
    input: str
    """The first 200 characters of the turn's input."""
    status: RunStatus
    output: str = ""
    """The first 200 characters of the answer (JSON text for structured answers), or the error."""
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    started_at: datetime
    finished_at: datetime | None = None
    violations: int = 0
    cost_usd: float = 0.0
    update_id: str | None = Field(default=None, exclude_if=lambda update_id: update_id is None)
    """The turn Update's id: a caller's resend under it after a continue-as-new is refused, not run again
    (None: a turn of a release before it, or a fork's first turn). Left out of the payload when unset."""


class SessionPoint(BaseModel):
    """Where a session's conversation stands: the stored conversation, the messages after it, and (code
    mode) the REPL memory. The three always move together: a completed turn moves the session to a new
    point, a failed one leaves it where it was, a rewind goes back to a checkpoint's and a fork starts at
    its source's. Never on the wire itself: the carried models keep the three as their own fields (their
    ``point`` reads them as one)."""

    model_config = ConfigDict(frozen=True)

    conversation: ConversationRef | None = None
    """Stored in the payload store (a hash chain), system message first."""
    messages: tuple[Message, ...] = ()
    """The messages after ``conversation`` (the last turn's answer, not stored yet)."""
    repl: ReplMemory | None = None

    @property
    def started(self) -> bool:
        """False before the first turn and after a rewind to 0: the next turn opens the conversation."""
        return self.conversation is not None or bool(self.messages)


class TurnCheckpoint(BaseModel):
    """The session's state right after a turn: what ``rewind`` goes back to."""

    turn: int
    conversation: ConversationRef | None = None
    messages: list[Message] = Field(default_factory=list)
    repl: ReplMemory | None = None
    effects: list[EffectRecord] = Field(default_factory=list)
    """The side effects this turn made (kept so a rewind past it can tell later turns)."""

    @classmethod
    def at(cls, turn: int, point: SessionPoint, effects: list[EffectRecord] | None = None) -> TurnCheckpoint:
        """The checkpoint after ``turn``, at ``point``."""
        return cls(
            turn=turn,
            conversation=point.conversation,
            messages=list(point.messages),
            repl=point.repl,
            effects=list(effects or []),
        )

    @property
    def point(self) -> SessionPoint:
        return SessionPoint(conversation=self.conversation, messages=tuple(self.messages), repl=self.repl)


class Rewind(BaseModel):
    """One rewind, for the audit trail: which turns it undid and the effects they had made (not undone)."""

    to_turn: int
    at: datetime
    undone: list[TurnSummary] = Field(default_factory=list)
    effects: list[EffectRecord] = Field(default_factory=list)


class RewindInput(BaseModel):
    """The ``rewind`` Update's argument: ``{"to_turn": N}`` (0: before the first turn)."""

    model_config = ConfigDict(extra="forbid")

    to_turn: int = Field(ge=0)


class SessionCarry(BaseModel):
    """The compact state a session carries across continue-as-new."""

    turns_done: int = 0
    conversation: ConversationRef | None = None
    """The conversation stored in the payload store (a hash chain), system message first."""
    messages: list[Message] = Field(default_factory=list)
    """The messages after ``conversation`` (the last turn's answer, not stored yet)."""
    turns: list[TurnSummary] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    created_at: datetime
    last_activity: datetime
    continued: int = 0
    """How many times this session has continued-as-new."""
    repl: ReplMemory | None = None
    """Code mode: the REPL state (signed, in the payload store) and the variables it holds."""
    decided: list[ApprovalRecord] = Field(default_factory=list)
    """The latest approval decisions (bounded), so a late second decision is still told it came too late."""
    untold_effects: list[UntoldEffects] = Field(default_factory=list)
    """Effects of failed or cancelled turns since the last completed one (bounded): the next turn's model
    is told; a completed turn, whose conversation now says so, clears them."""
    steps: int = 0
    """Steps over every turn (the search attributes' totals)."""
    violations: int = 0
    cost_usd: float = 0.0
    tools: list[ToolSchema] | None = None
    """The tool schemas the session's runs have used: a continued run takes them instead of describing
    its tools again (None: carried by a release before this field, or not described yet)."""
    tools_ref: ToolCatalogRef | None = Field(default=None, exclude_if=lambda ref: ref is None)
    """``tools`` as the catalog the session stored them as, bound to the session (``chain``): every model call
    of every turn names it instead of carrying the schemas. Set only beside the ``tools`` it names (a describe
    clears it). None: carried by a worker before session catalogs (the next call with the schemas stores
    one), or no call has stored it yet. Left out of the payload when unset."""
    chain: str | None = None
    """The session this state belongs to, ``<workflow id>/<first run id>`` (``session_owner``); a run
    accepts carried state only when it names the run's own chain (None: carried by an older release)."""
    checkpoints: list[TurnCheckpoint] = Field(default_factory=list)
    """The state after each of the last ``turns_kept`` turns still in effect: what a rewind can go back to."""
    rewinds: list[Rewind] = Field(default_factory=list)
    """Every rewind, oldest first: the undone turns stay readable."""
    undone_effects: list[EffectRecord] = Field(default_factory=list)
    """Effects of undone turns: every later turn is told of them and never repeats one."""
    forked_from: str | None = None
    """A fork session: the session it was forked from (its effects are in ``undone_effects`` too)."""

    @property
    def point(self) -> SessionPoint:
        """Where the conversation stands now (changed only by ``workflows/session_state.py``'s verbs)."""
        return SessionPoint(conversation=self.conversation, messages=tuple(self.messages), repl=self.repl)


class ForkSource(BaseModel):
    """What the ``fork_source`` query returns: where a fork of one of the session's turns starts from."""

    owner: str
    """``session_owner``: the chain the session's stored conversation and REPL dumps are bound to."""
    checkpoints: list[TurnCheckpoint] = Field(default_factory=list)
    undone_effects: list[EffectRecord] = Field(default_factory=list)
    """Effects of undone turns, and those a fork session inherited from its own source."""
    untold_effects: list[UntoldEffects] = Field(default_factory=list)
    rewinds: list[Rewind] = Field(default_factory=list)


class SessionFork(BaseModel):
    """A new session's start from another session's state before step ``at_step`` of turn ``turn``.

    ``conversation`` and ``repl`` are still the source's (bound to ``owner``): the fork's first activity,
    ``session.fork``, has the worker check them against the source and bind them to the fork, so one
    session never loads another's blob unchecked. ``effects`` are every effect the source made that the
    fork knows of: its model is told, and an identical call is answered from them, never executed again.
    """

    session_id: str
    owner: str
    """The source's ``session_owner`` (``<session id>/<first run id>``)."""
    turn: int = Field(ge=1)
    at_step: int = Field(ge=0)
    conversation: ConversationRef | None = None
    """The source's stored conversation before the turn (system message first)."""
    messages: list[Message] = Field(default_factory=list)
    """The messages after ``conversation`` before the turn."""
    repl: ReplMemory | None = None
    """Code mode: the source's REPL memory at the turn's start (every program of a turn starts from it)."""
    turn_messages: list[Message] = Field(default_factory=list)
    """The turn's steps before ``at_step``, after its user message (and a new user message, if asked)."""
    effects: list[EffectRecord] = Field(default_factory=list)

    @property
    def point(self) -> SessionPoint:
        """The source's point before the turn (its conversation and REPL still bound to ``owner``)."""
        return SessionPoint(conversation=self.conversation, messages=tuple(self.messages), repl=self.repl)


class SessionForkInput(BaseModel):
    """``session.fork``: the source's state, checked against ``source_owner`` and bound to ``owner``."""

    source_session: str
    source_owner: str
    owner: str
    repl_key: str
    """The fork's REPL key (``repl_keys``): the memory comes back signed for it."""
    conversation: ConversationRef | None = None
    repl: ReplMemory | None = None


class SessionForkBound(BaseModel):
    """``session.fork``'s result: the same state, now the fork's."""

    conversation: ConversationRef | None = None
    repl: ReplMemory | None = None


class SessionInput(BaseModel):
    spec: AgentSpec
    session: SessionConfig = Field(default_factory=SessionConfig)
    carried: SessionCarry | None = None
    """Set only by the session's own continue-as-new; a session started with it is refused
    (``CarriedStateError``) and loads none of it."""
    stream: Any = None
    """Set only by continue-as-new: the progress stream's ``WorkflowStreamState`` (recent events)."""
    key_scope: str | None = None
    """As ``AgentInput.key_scope``: where the session's effect keys are unique (unset: this session)."""
    fork: SessionFork | None = None
    """Set by ``fork_session``: this new session starts from another's state inside one of its turns;
    its first turn goes on from there (its number is that turn's)."""
    tenant: str | None = None
    """As ``AgentInput.tenant``."""
    quota: QuotaPlan | None = None
    """As ``AgentInput.quota``: ignored by new runs (the worker's config decides); a session's own continue-as-new
    carries its plan here for a worker from before ``QUOTA_FROM_WORKER_PATCH``."""


class TurnInput(BaseModel):
    """The ``turn`` Update's argument: ``{"input": "..."}``."""

    model_config = ConfigDict(extra="forbid")

    input: str


class TurnResult(AgentResult):
    """The turn's result: ``AgentResult``'s fields for this turn, plus where it sits."""

    session_id: str = ""
    turn: int = 0


class CloseInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = "closed by caller"


ProgressKind = Literal[
    "turn_started", "step", "tool_call", "approval_requested", "approval_decided", "usage", "turn_ended", "token"
]


class ProgressEvent(BaseModel):
    """One item on a session's progress stream (topic ``progress``)."""

    kind: ProgressKind
    turn: int
    at: datetime
    step: int | None = None
    tool: str | None = None
    detail: str = ""
    """Step kind, a tool call's arguments, an approval's outcome, the turn's status and answer preview,
    or (``token``) the next piece of the answer's text."""
    attempt: int | None = None
    """``token``: the ``llm.call`` attempt that streamed it; a retried call streams its answer again."""
    offset: int | None = None
    """``token``: where ``detail`` starts in its call's answer (characters), so a reader folds a retried
    attempt's replayed prefix away (``client/session_stream.py``)."""
    model: str | None = None
    """``token``: the model answering; a new one within a step is a fallback."""
    text_chars: int | None = None
    """``step``: the length of the step's completed answer text, which the streamed text must equal."""
    text_digest: str | None = None
    """``step``: the SHA-256 of that text (hex); a reader's transcript agrees with the answer when it matches."""
    usage: Usage | None = None
    """``usage``: the turn's tokens so far; ``turn_ended``: the turn's total."""
    approval: PendingApproval | None = None


def text_digest(text: str) -> str:
    """A step's answer text as its ``step`` event names it (``ProgressEvent.text_digest``)."""
    return hashlib.sha256(text.encode()).hexdigest()


SessionStatus = Literal["idle", "running", "closed"]


class SessionState(BaseModel):
    """What the session's ``state`` query returns."""

    session_id: str
    status: SessionStatus
    turns: int
    """Turns finished (completed or failed)."""
    current_turn: int | None = None
    usage: Usage = Field(default_factory=Usage)
    """Tokens over the whole session."""
    created_at: datetime
    last_activity: datetime
    idle_timeout_seconds: float
    continued: int = 0
    closed_reason: str | None = None
    variables: list[VariableInfo] = Field(default_factory=list)
    """Code mode: the variables the REPL keeps (name and type)."""
    untold_effects: list[UntoldEffects] = Field(default_factory=list)
    """Side effects of failed or cancelled turns that the conversation does not hold yet (the next
    turn's model is told of them)."""
    steps: int = 0
    violations: int = 0
    cost_usd: float = 0.0
    mode: Literal["tools", "code"] = "tools"
    """The spec's mode (code mode: a step's content is its program)."""
    rewinds: list[Rewind] = Field(default_factory=list)
    """Every rewind: the turns it undid and the effects they had made."""
    forked_from: str | None = None
    """A fork session: the session it was forked from (``fork_session``)."""


class SessionOutcome(BaseModel):
    """The workflow's result once the session has ended."""

    session_id: str
    reason: str
    """``closed by caller`` (or the close note), or ``idle_timeout``."""
    turns: int
    usage: Usage = Field(default_factory=Usage)


def session_owner(workflow_id: str, first_run_id: str) -> str:
    """Who a session's stored state belongs to: its id and the first run of its continue-as-new chain,
    so a new session later started under the same id owns none of the old one's state."""
    return chain_owner(workflow_id, first_run_id)


def repl_keys(workflow_id: str, first_run_id: str) -> tuple[str, str]:
    """What a session's REPL dumps are signed for: the current key (bound to the chain), then the
    key sessions started by earlier releases still use (bound to the id)."""
    return repl_keys_of(workflow_id, first_run_id)


def carried_problem(
    inp: SessionInput, *, workflow_id: str, first_run_id: str, continued: bool, cron: bool, attempt: int
) -> str | None:
    """Why this run may not take ``inp``'s carried state, or None. Pure: the workflow asks it first.

    Carried state comes only from the session's own continue-as-new: the run
    must be a continuation (a starter cannot set that) of the chain the state
    names. State carried by an older release names no chain; it is taken only
    by a plain continuation (not a retry or a cron run, which repeat the
    starter's input).
    """
    carry = inp.carried
    if carry is None and inp.stream is None:
        return None
    if not continued:
        return "carried state is accepted only from the session's own continue-as-new; a new session starts without it"
    if carry is None:
        return None
    if carry.chain is not None and carry.chain != session_owner(workflow_id, first_run_id):
        return "the carried state belongs to another session"
    if carry.chain is None and (cron or attempt > 1):
        return "carried state that names no session is not accepted by a retried or scheduled run"
    if carry.repl is not None and carry.repl.key not in repl_keys(workflow_id, first_run_id):
        return "the carried REPL memory belongs to another session"
    return None


def parse_turn(raw: Any, limit: int) -> TurnInput:
    """The ``turn`` Update's argument as sent by any client, or ``ValueError`` saying what is wrong.

    The Update takes the raw JSON value, not ``TurnInput``, so a wrong type is
    refused here with the field it concerns instead of a bare decoding error.
    """
    if isinstance(raw, TurnInput):
        turn = raw
    else:
        try:
            turn = TurnInput.model_validate(raw)
        except ValidationError as exc:
            detail = "; ".join(f"{json_path('$', e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ValueError(
                f'a turn is a JSON object {{"input": "<text>"}}; got {type(raw).__name__}: {detail}'
            ) from None
    problem = turn_input_problem(turn.input, limit)
    if problem is not None:
        raise ValueError(problem)
    return turn


def turn_input_problem(text: str, limit: int) -> str | None:
    """Why ``text`` cannot be a turn's input, or None. Pure: the Update validator calls it."""
    if not text.strip():
        return "the turn's input is empty"
    if len(text) > limit:
        return f"the turn's input has {len(text)} characters; this session accepts at most {limit}"
    for index, char in enumerate(text):
        category = unicodedata.category(char)
        if (category == "Cc" and char not in "\t\n\r") or category == "Cs":
            return f"the turn's input holds a control or invalid character (U+{ord(char):04X}) at index {index}"
    return None


def preview(text: str) -> str:
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


__all__ = [
    "MAX_TURN_INPUT_CHARS",
    "ProgressEvent",
    "ProgressKind",
    "CloseInput",
    "ForkSource",
    "SessionFork",
    "SessionForkBound",
    "SessionForkInput",
    "SessionCarry",
    "SessionConfig",
    "SessionInput",
    "SessionOutcome",
    "SessionPoint",
    "SessionState",
    "SessionStatus",
    "TurnInput",
    "TurnResult",
    "TurnSummary",
    "carried_problem",
    "parse_turn",
    "repl_keys",
    "session_owner",
    "preview",
    "turn_input_problem",
]
