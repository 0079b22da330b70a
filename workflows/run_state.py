"""The shape of one agent run's state, and who may change what.

A run (a one-shot ``AgentWorkflow`` or one session turn) has three parts:

- ``RunConfig``, frozen: what the run is. Spec, tools, key scope, turn, where
  progress events go, the stored conversation, the approval desk, whether
  answers stream. Built once by the workflow that owns the run
  (``AgentRun.one_shot`` / ``AgentRun.for_turn``); nothing changes it after.
- ``RunProgress``, mutable: what the run has done so far. Result, history,
  current model, cancel flag, REPL. The owning workflow creates it first (its
  queries and its cancel signal work before the run has its tools), then only
  reads it and calls ``request_cancel``; everything else changes through
  ``AgentRun``'s methods, the history through ``AgentRun.advance`` alone.
- ``Features``: the patched behaviours the run takes, each chosen once and
  read by name (``run.features.token_stream``), never asked again at a call.

Deterministic: no I/O. ``Features`` asks every patch on the run's path but one:
the ladder's refusal patch, which ``ViolationLadder`` (shared with pipelines and
the monitor) asks itself at that rung.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import AgentResult, AgentSpec, AgentState, Message, ToolSchema
    from ..contracts.code.program import ReplMemory
    from ..contracts.llm.tool_catalog import ToolCatalogRef
    from ..contracts.names import (
        APPROVALS_PATCH,
        CONVERSATION_REF_PATCH,
        EFFECTS_PATCH,
        EXACTLY_ONCE_PATCH,
        PATCH_TOOL_RESULT_CAP,
        RELEASE_PATCH,
        SESSION_STATE_PATCH,
        TOKEN_STREAM_PATCH,
    )
    from ..contracts.quotas.wire import QuotaPlan
    from ..contracts.session import ProgressEvent
    from .approvals import ApprovalDesk
    from .conversation import ConversationChain
    from .quota_gate import QuotaDesk


def patched_since_release(patch_id: str) -> bool:
    """Asked where ``patch_id`` always was: a new run takes it under ``RELEASE_PATCH`` (one marker for the
    release), a run recorded between ``patch_id`` and the release asks it as it did."""
    return workflow.patched(RELEASE_PATCH) or workflow.patched(patch_id)


class Features:
    """The patched behaviours of one run, each chosen once and read by name.

    ``workflow.patched`` writes its marker command where it is first asked, so
    recorded histories replay only if each id is first asked where it always
    was. The two a run takes before its first command are asked in
    ``at_start``; the rest only where their branch first comes up (asking them
    up front would add a marker to runs that never take the branch), and the
    answer is kept here.

    A new run asks ``RELEASE_PATCH`` first and, taking it, every behaviour below
    without asking its own id: one marker a run, not one per id. A run recorded
    before it (the release marker absent) asks each id as it always did.
    """

    def __init__(self, *, effects_once: bool, conversation_ref: bool, release: bool = False) -> None:
        self.effects_once = effects_once
        """Effect keys, the effect ledger and the token-budget reservation (``EFFECTS_PATCH``)."""
        self.conversation_ref = conversation_ref
        """A one-shot run keeps its conversation in the payload store (``CONVERSATION_REF_PATCH``); a turn always does."""
        self.release = release
        """``RELEASE_PATCH``: every behaviour gated by an earlier id, none of them asked."""
        self._asked: dict[str, bool] = {}

    @classmethod
    def at_start(cls, *, one_shot: bool) -> Features:
        """Asked before the run's first command, in the order runs have always asked them."""
        if workflow.patched(RELEASE_PATCH):
            return cls(effects_once=True, conversation_ref=True, release=True)
        effects_once = workflow.patched(EFFECTS_PATCH)
        conversation_ref = workflow.patched(CONVERSATION_REF_PATCH) if one_shot else True
        return cls(effects_once=effects_once, conversation_ref=conversation_ref)

    def _ask(self, patch_id: str) -> bool:
        if self.release:
            return True
        if patch_id not in self._asked:
            self._asked[patch_id] = workflow.patched(patch_id)
        return self._asked[patch_id]

    @property
    def token_stream(self) -> bool:
        """Loop steps ask ``llm.call`` to stream; asked at the first step of a streaming run."""
        return self._ask(TOKEN_STREAM_PATCH)

    @property
    def tool_result_cap(self) -> bool:
        """Tool results are cut to ``tool_result_chars``; asked after the first tool step."""
        return self._ask(PATCH_TOOL_RESULT_CAP)

    @property
    def approvals(self) -> bool:
        """Tools that require approval wait for it; asked at the first such call."""
        return self._ask(APPROVALS_PATCH)

    @property
    def recorded_not_reasked(self) -> bool:
        """A call already in the record of effects is answered from it without asking for approval again;
        asked only when a recorded call to a tool that requires approval comes up again."""
        return self._ask(EXACTLY_ONCE_PATCH)

    def cancel_siblings(self) -> bool:
        """A failing call cancels the calls running beside it and withdraws their approvals
        (``siblings``); asked only once a call has failed. A method: it is handed on uncalled."""
        return self._ask(SESSION_STATE_PATCH)


@dataclass(frozen=True)
class RunConfig:
    """What the run is: set once at construction, never changed."""

    spec: AgentSpec
    tools: tuple[ToolSchema, ...]
    approvals: ApprovalDesk
    """A session hands every turn its own desk, so decisions outlive the turn."""
    chain: ConversationChain | None = None
    """The conversation lives in the payload store (every session turn; a one-shot run since
    ``CONVERSATION_REF_PATCH``) and each step sends only what came after the stored prefix."""
    scope: str = ""
    """Prefix of every step index in idempotency and program keys; a session sets ``t<turn>.``."""
    turn: int = 0
    on_event: Callable[[ProgressEvent], None] | None = None
    """Sessions: where progress events go (the session's stream); a one-shot run has none."""
    stream_tokens: bool = False
    """Sessions with ``stream_tokens``: loop steps ask ``llm.call`` to stream the answer's text."""
    pending_tools: tuple[str, ...] = ()
    """Tool names the run's first ``llm.call`` resolves on the worker (a one-shot tool-mode run under
    ``RELEASE_PATCH``: no ``tools.describe`` activity); ``AgentRun.learn_tools`` then sets ``tools``."""
    tools_ref: ToolCatalogRef | None = None
    """The catalog ``tools`` are stored as (``LLMResponse.tools_ref``): calls name it instead of carrying the
    schemas. A one-shot run's resolving call stores it; a session's first call with its schemas does, and the
    session hands it to every later turn. None when no call's result had one (older workers, recorded runs)."""
    session_catalog: bool = False
    """A session turn: until ``tools_ref`` is known, a call carrying ``tools`` asks the worker to store them
    (``LLMRequest.store_tools``) and the run learns the ref from its result."""
    key_scope: str | None = None
    """The backend's scope for effect keys (``AgentInput.key_scope``, validated by the workflow); unset:
    the run's workflow chain."""
    quota: QuotaPlan | None = None
    """The accounts every model call goes through (``AgentInput.quota``); unset: no quota command at all."""
    quota_desk: QuotaDesk | None = None
    """Where the workflow's ``quota_grant`` signal puts the grants (set with ``quota``)."""
    schemas: Mapping[str, ToolSchema] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "schemas", MappingProxyType({t.name: t for t in self.tools}))

    @property
    def mode(self) -> str:
        return self.spec.mode


@dataclass
class RunProgress:
    """What the run has done so far; see the module docstring for who may change what."""

    result: AgentResult = field(default_factory=lambda: AgentResult(status="running"))
    repl: ReplMemory | None = None
    """Code-mode sessions: the REPL state programs run in; a completed turn leaves the new one here."""
    model: str = ""
    """The model of the latest call (the state query reports it)."""
    cancel_requested: bool = False
    reserved_tokens: int = 0
    """Tokens reserved by model calls in flight (the budget counts them as spent)."""
    quota_waits: int = 0
    """Model calls waiting for their quota's grant: the state query says ``waiting_for_quota``."""
    _history: list[Message] = field(default_factory=list, init=False, repr=False)

    @property
    def history(self) -> list[Message]:
        """The conversation as the loop left it: the final answer last when the run completed."""
        return self._history

    def request_cancel(self) -> None:
        """The owner's cancel signal: the loop stops before its next step."""
        self.cancel_requested = True

    def state(self) -> AgentState:
        result = self.result
        return AgentState(
            status="waiting_for_quota" if self.quota_waits and result.status == "running" else result.status,
            step=len(result.steps),
            model=self.model,
            usage=result.usage,
            violations=len(result.violations),
            degradations=len(result.degradations),
            last_step=result.steps[-1].kind if result.steps else None,
            mode=result.mode,
        )


__all__ = ["Features", "RunConfig", "RunProgress"]
