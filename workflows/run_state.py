"""The shape of one agent run's state, and who may change what.

A run (a one-shot ``AgentWorkflow`` or one session turn) has four parts:

- ``RunConfig``, frozen: what the run is. Spec, key scope, turn, where
  progress events go, the stored conversation, the approval desk, whether
  answers stream, the quota plan. Built once by the workflow that owns the run
  (``AgentRun.one_shot`` / ``AgentRun.for_turn``); nothing changes it after.
- ``RunTools``: the run's tool schemas and what the run learns about them
  (the names its first model call resolves, the catalog a call stored them
  as). They change only through its own verbs (``learn``, ``stored_as``).
- ``RunProgress``, mutable: what the run has done so far. Result, history,
  current model, cancel flag, REPL. The owning workflow creates it first (its
  queries and its cancel signal work before the run has its tools), then only
  reads it and calls ``request_cancel``; everything else changes through
  ``AgentRun``'s methods, the history through ``RunProgress.advance`` (which
  only ``AgentRun.advance`` calls).
- ``Features`` (``releases/gates.py``): the patched behaviours the run takes,
  each chosen once and read by name (``run.features.token_stream``).

Deterministic: no I/O, no Temporal command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ..contracts import AgentResult, AgentSpec, AgentState, LLMRequest, Message, ToolSchema
    from ..contracts.code.program import ReplMemory
    from ..contracts.llm.tool_catalog import ToolCatalogRef
    from ..contracts.session import ProgressEvent
    from .approvals import ApprovalDesk
    from .conversation import ConversationChain
    from .quota_gate import QuotaDesk, RunPlan


@dataclass(frozen=True)
class RunConfig:
    """What the run is: set once at construction, never changed."""

    spec: AgentSpec
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
    key_scope: str | None = None
    """The backend's scope for effect keys (``AgentInput.key_scope``, validated by the workflow); unset:
    the run's workflow chain."""
    quota: RunPlan | None = None
    """The accounts every model call goes through, the worker's (``quota_gate.worker_plan``: known at the
    start, or learned from the first call); unset, or no plan: no quota command at all."""
    quota_desk: QuotaDesk | None = None
    """Where the workflow's ``quota_grant`` signal puts the grants (set with ``quota``)."""

    @property
    def mode(self) -> str:
        return self.spec.mode


class RunTools:
    """The run's tool schemas, and the two things a run learns about them while it runs.

    - A one-shot tool-mode run under ``RELEASE_PATCH`` starts with tool names
      only (``pending``): its first ``llm.call`` resolves them on the worker (no
      ``tools.describe`` activity), and the run ``learn``s the schemas from that
      call's result (in history, as a ``tools.describe`` result is).
    - Once a call stored the schemas as a catalog (``LLMResponse.tools_ref``),
      later calls name the catalog instead of carrying them (``on_the_wire``).
      A one-shot run's resolving call stores it; a session turn's first call
      carrying the schemas asks the worker to (``LLMRequest.store_tools``), and
      the session hands the ref to every later turn. None when no call's result
      had one (older workers, recorded runs): calls then carry the schemas.
    """

    def __init__(
        self,
        schemas: Sequence[ToolSchema] = (),
        *,
        pending: Sequence[str] = (),
        ref: ToolCatalogRef | None = None,
        session_catalog: bool = False,
    ) -> None:
        self._schemas = tuple(schemas)
        self._by_name = {t.name: t for t in self._schemas}
        self._pending = tuple(pending)
        self._ref = ref
        self._session_catalog = session_catalog

    @classmethod
    def for_turn(cls, schemas: Sequence[ToolSchema], ref: ToolCatalogRef | None) -> RunTools:
        """A session turn's: ``ref`` the session's catalog of exactly ``schemas`` (None: the turn's first call
        carrying them stores one)."""
        if ref is not None and ref.count != len(schemas):
            ref = None  # never names other schemas than the turn's (the session pairs them; a cheap check)
        return cls(schemas, ref=ref, session_catalog=True)

    @property
    def schemas(self) -> tuple[ToolSchema, ...]:
        return self._schemas

    @property
    def pending(self) -> tuple[str, ...]:
        """Tool names the run's next model call resolves on the worker; empty once it has (or never had any)."""
        return self._pending

    @property
    def ref(self) -> ToolCatalogRef | None:
        """The catalog ``schemas`` are stored as, once a call stored them."""
        return self._ref

    def schema(self, name: str) -> ToolSchema | None:
        return self._by_name.get(name)

    def learn(self, schemas: Sequence[ToolSchema], ref: ToolCatalogRef | None) -> None:
        """The schemas the resolving call returned for ``pending``, stored as ``ref`` (None from workers before
        catalogs): the run keeps them as it keeps a ``tools.describe`` result."""
        self._schemas = tuple(schemas)
        self._by_name = {t.name: t for t in self._schemas}
        self._pending = ()
        self._ref = ref

    def stored_as(self, ref: ToolCatalogRef | None) -> None:
        """A call's result named ``ref``: a session turn's call stored its schemas (``store_tools``), and later
        calls name them. Only a result recorded by a worker since session catalogs has a ref, so older histories
        replay as sent; a run that knows its catalog already keeps it."""
        if ref is not None and self._ref is None and self._session_catalog:
            self._ref = ref

    def on_the_wire(self, request: LLMRequest, sent: LLMRequest) -> LLMRequest:
        """``sent`` (``request`` as it goes into history) naming the catalog instead of the schemas, or asking
        the worker to store them; only when ``request`` carries exactly the run's schemas."""
        if not request.tools or tuple(request.tools) != self._schemas:
            return sent
        if self._ref is not None:
            return sent.model_copy(update={"tools": [], "tools_ref": self._ref})
        if self._session_catalog:
            return sent.model_copy(update={"store_tools": True})
        return sent


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

    def advance(self, history: list[Message]) -> list[Message]:
        """The one way the history changes (the loops call ``AgentRun.advance``): ``history`` is the run's
        conversation as it now stands, returned as is."""
        self._history = history
        return history

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


__all__ = ["RunConfig", "RunProgress", "RunTools"]
