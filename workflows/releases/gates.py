"""Every ``workflow.patched`` question the engine asks, one named function (or ``Features`` property) each.

``workflow.patched`` writes its marker command where it is first asked, so a
recorded run replays only if each id is first asked at the same point of its
command order as when it ran. That is why every question is asked where its
branch first comes up, by the code on today's path, through a name that says
what one branch does (``second_refusal_degrades``); only a run recorded
before the id takes the old branch (``registry.py`` lists the recorded ones).

A new run asks the newest release id first (``RELEASE_2026_12_06_PATCH``)
and, taking it, every behaviour gated by an id it covers (``registry.py``:
``under``), ``RELEASE_PATCH``'s included, without asking that id: one marker a
run, not one per id. A run recorded before it (no marker of it) asks
``RELEASE_PATCH`` next, and a run recorded before that each id where it
always did.

Deterministic: no I/O; each function asks at most the ids it names.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from ...contracts import ToolSchema
    from ...contracts.names import (
        APPROVAL_NOTIFY_PATCH,
        APPROVALS_CARRIED_PATCH,
        APPROVALS_PATCH,
        CODE_CALL_CARRIES_PROGRAM_PATCH,
        CONVERSATION_REF_PATCH,
        EFFECTS_PATCH,
        EXACTLY_ONCE_PATCH,
        PATCH_TOOL_RESULT_CAP,
        QUOTA_FROM_WORKER_PATCH,
        REFUSAL_REPROMPTED_ONCE,
        RELEASE_2026_12_06_PATCH,
        RELEASE_PATCH,
        SEARCH_ATTRIBUTES_PATCH,
        SESSION_STATE_PATCH,
        TOKEN_STREAM_PATCH,
    )


def since_latest_release() -> bool:
    """``RELEASE_2026_12_06_PATCH``: asked first, before a run's (or session run's) first command; every later
    ask is answered from the SDK's memo, with no command."""
    return workflow.patched(RELEASE_2026_12_06_PATCH)


def _since_release(patch_id: str) -> bool:
    """Asked where ``patch_id`` always was: a new run takes it under the newest release (one marker for the
    release), a run recorded before that release under ``RELEASE_PATCH``, and a run recorded between
    ``patch_id`` and ``RELEASE_PATCH`` asks it as it did."""
    return since_latest_release() or workflow.patched(RELEASE_PATCH) or workflow.patched(patch_id)


def _since_latest_release(patch_id: str) -> bool:
    """``patch_id`` added after ``RELEASE_PATCH`` (or asked outside it): a new run takes it under the newest
    release, a run recorded before that release asks it where it always did."""
    return since_latest_release() or workflow.patched(patch_id)


class Features:
    """The patched behaviours of one agent run (a one-shot run or a session turn), each chosen once.

    The two a run takes before its first command are asked in ``at_start``; the
    rest only where their branch first comes up (asking them up front would add
    a marker to runs that never take the branch), and the answer is kept here.
    """

    def __init__(self, *, effects_once: bool, conversation_ref: bool, release: bool = False) -> None:
        self.effects_once = effects_once
        """Effect keys, the effect ledger and the token-budget reservation (``EFFECTS_PATCH``)."""
        self.conversation_ref = conversation_ref
        """A one-shot run keeps its conversation in the payload store (``CONVERSATION_REF_PATCH``); a turn
        always does."""
        self.release = release
        """``RELEASE_PATCH`` (or the newest release, which covers it): every behaviour gated by an earlier id,
        none of them asked."""
        self._asked: dict[str, bool] = {}

    @classmethod
    def at_start(cls, *, one_shot: bool) -> Features:
        """Asked before the run's first command, in the order runs have always asked them."""
        if since_latest_release() or workflow.patched(RELEASE_PATCH):
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

    def asks_approval_again(self, schema: ToolSchema | None) -> bool:
        """A call already in the record of effects comes up again: True when the run was recorded before
        ``EXACTLY_ONCE_PATCH`` and the tool requires approval (such runs asked the approver first); asked only
        for such a tool."""
        return schema is not None and schema.requires_approval and not self._ask(EXACTLY_ONCE_PATCH)

    def cancel_siblings(self) -> bool:
        """A failing call cancels the calls running beside it and withdraws their approvals
        (``siblings``); asked only once a call has failed. A method: it is handed on uncalled."""
        return self._ask(SESSION_STATE_PATCH)


def keeps_search_attributes() -> bool:
    """Runs and sessions upsert the ``AgentSteps*`` search attributes (``SEARCH_ATTRIBUTES_PATCH``); asked
    before a run's first command."""
    return _since_release(SEARCH_ATTRIBUTES_PATCH)


def takes_carried_tools() -> bool:
    """A session run takes the tool schemas its continue-as-new carried, and describes them lazily at a turn
    (``SESSION_STATE_PATCH``); asked at the run's start, before anything else it schedules."""
    return _since_release(SESSION_STATE_PATCH)


def carries_decisions() -> bool:
    """A session's continue-as-new carries its latest approval decisions (``APPROVALS_CARRIED_PATCH``; a run
    recorded before the newest release asks it at each continue-as-new)."""
    return _since_latest_release(APPROVALS_CARRIED_PATCH)


def notifies_approvers() -> bool:
    """A call that starts waiting schedules ``approval.notify``, and a reminder before its timeout
    (``APPROVAL_NOTIFY_PATCH``; a run recorded before the newest release asks it at its first waiting call)."""
    return _since_latest_release(APPROVAL_NOTIFY_PATCH)


def calls_carry_programs() -> bool:
    """A tool call its kept-live program waits on alone carries the program, and its activity answers with the
    program's next pause (``CODE_CALL_CARRIES_PROGRAM_PATCH``; a run recorded before the newest release asks
    it at a program's first such call: each program asks, the SDK answers a repeat from its memo)."""
    return _since_latest_release(CODE_CALL_CARRIES_PROGRAM_PATCH)


def effects_once() -> bool:
    """A pipeline describes its tools for their delivery policies, a monitor tick bounds its record's retries
    (``EFFECTS_PATCH``, not under the release); asked at the run's start."""
    return workflow.patched(EFFECTS_PATCH)


def plan_rides_first_call() -> bool:
    """The worker's quota plan comes with the run's first model call (``llm.call.plan_first``), not from a
    ``quota.plan`` local activity at every start: the newest release (asked already: answered from memo)."""
    return since_latest_release()


def quotas_from_worker() -> bool:
    """A run recorded before the newest release takes its quota plan from the worker's config (the
    ``quota.plan`` local activity) and ignores the one in its input (``QUOTA_FROM_WORKER_PATCH``); asked at
    such a run's, and each session run's, start, after its tenant is checked (``plan_rides_first_call`` first)."""
    return workflow.patched(QUOTA_FROM_WORKER_PATCH)


def second_refusal_degrades(release: bool) -> bool:
    """A refusal right after a refusal skips the re-prompt rung (``REFUSAL_REPROMPTED_ONCE``); asked only
    there, so older histories replay their second re-prompt. ``release``: the run took ``RELEASE_PATCH``."""
    return release or workflow.patched(REFUSAL_REPROMPTED_ONCE)


def cancel_ends_at_most_once_call() -> bool:
    """A workflow cancel during an at-most-once call cancels the run (``EXACTLY_ONCE_PATCH``); runs recorded
    before it told the model an unknown outcome. Asked only when that call was cancelled."""
    return _since_release(EXACTLY_ONCE_PATCH)


def retries_at_most_once_after_any_failure() -> bool:
    """True for runs recorded before ``EXACTLY_ONCE_PATCH``, which retried an at-most-once call after any
    application failure; since, only a ``ToolNotSentError`` is retried. Asked only after another failure."""
    return not _since_release(EXACTLY_ONCE_PATCH)


__all__ = [
    "Features",
    "calls_carry_programs",
    "notifies_approvers",
    "plan_rides_first_call",
    "quotas_from_worker",
    "since_latest_release",
    "cancel_ends_at_most_once_call",
    "carries_decisions",
    "effects_once",
    "keeps_search_attributes",
    "retries_at_most_once_after_any_failure",
    "second_refusal_degrades",
    "takes_carried_tools",
]
