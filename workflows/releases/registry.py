"""Every ``workflow.patched`` id the engine has shipped: who added it, which recorded histories need it, when it may go.

A patch id is persisted: a run that took the branch carries the id in a
marker event, and a worker replaying that run must ask the same id at the
same point in its command order. So ids are never renamed or reused, and an
id's old branch (what runs recorded before it do) stays until no open run can
take it. This table is what a maintainer reads before touching one; it is
data only (no Temporal), and ``tests/workflows/test_patch_registry.py`` and
``tests/workflows/test_replay_histories.py`` hold it to the code and to
``tests/histories/``:

- ``marked``: the recorded histories whose ``MarkerRecorded`` events carry the
  id (they replay its new branch, and need the id asked where it was);
- ``old_branch``: the recorded histories that ask the id and find no marker
  (runs from before it: they replay its old branch, and are the evidence that
  the gate still keeps those runs' commands).

Retiring an id is two changes, each its own release (docs/upgrades.md):

1. When no open run can take the old branch (``may_go``), delete the old
   branch and the ``old_branch`` histories. An id a run asks only without a
   release marker (``under``) then goes entirely: every open run took that
   release and never asks it. Any other id becomes
   ``workflow.deprecate_patch(<id>)`` at the same point.
2. Once no open run carries its marker either, the ``deprecate_patch`` call
   goes too, with the ``marked`` histories. Keep the constant in
   ``contracts/names.py`` (and its row here) until then.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Patch:
    id: str
    """The persisted id (a constant of ``contracts/names.py``): never renamed."""
    added: str
    """The change that added it: issue, commit and date (0.2.0 shipped on 2026-12-01)."""
    old_branch_does: str
    """What a run recorded before it does instead: the branch that goes when the id does."""
    asked_at: str
    """Where the engine asks it (``workflows/releases/gates.py`` has every question)."""
    under: tuple[str, ...]
    """The release ids (``RELEASE_PATCH``, ``RELEASE_2026_12_06_PATCH``) a run that took one of takes this
    branch under without asking the id."""
    marked: tuple[str, ...]
    """Recorded histories (``tests/histories/<name>.json``) whose markers carry the id."""
    old_branch: tuple[str, ...]
    """Recorded histories that ask the id and find no marker: they replay its old branch."""
    may_go: str
    """When the old branch may go (step 1 of the module docstring)."""


_BOTH_RELEASES = (RELEASE_PATCH, RELEASE_2026_12_06_PATCH)
_LATEST_RELEASE = (RELEASE_2026_12_06_PATCH,)

_BEFORE_RELEASE = (
    "when no run started before the 0.2.0 workers (which ask `agentsteps.release.2026-12`) were deployed is "
    'still open: `temporal workflow count --query \'ExecutionStatus="Running" AND StartTime < "<that deploy>"\'` '
    "is 0 (a session continued since is a new run: it counts from its latest start). Then the id is never "
    "asked again: its gate, old branch and both lists of histories go at once, no `deprecate_patch` needed."
)

_BEFORE_ANY_PATCH_AGENT_RUNS = (
    "agent_code_mode",
    "agent_tool_mode",
    "code_mode",
    "code_mode_paused_on_tool",
    "refusal_reprompted_twice",
    "tool_mode",
    "tool_mode_waiting_on_tool",
)
"""Agent runs recorded before any patch id existed (issue 13 and earlier)."""

_CONVERSATION_REF_RUNS = (
    "conversation_ref_agent_code_mode",
    "conversation_ref_code_mode",
    "conversation_ref_code_mode_paused_on_tool",
    "conversation_ref_tool_mode",
    "conversation_ref_tool_mode_waiting_on_tool",
)
_SEARCH_ATTRIBUTES_AGENT_RUNS = (
    "search_attributes_agent_code_mode",
    "search_attributes_code_mode",
    "search_attributes_code_mode_paused_on_tool",
    "search_attributes_tool_mode",
    "search_attributes_tool_mode_waiting_on_tool",
)
_EXACTLY_ONCE_EVIDENCE = ("approval_asked_again_for_a_recorded_effect", "at_most_once_retried_after_the_call")
_RELEASE_RUNS = (
    "kept_live_agent_code_mode_fork_waiting",
    "release_2026_12_agent_code_mode",
    "release_2026_12_agent_code_mode_fork_waiting",
    "release_2026_12_code_mode",
    "release_2026_12_code_mode_paused_on_tool",
    "release_2026_12_quota_tool_mode",
    "release_2026_12_session_between_turns",
    "release_2026_12_session_fork_between_turns",
    "release_2026_12_session_streamed_continued",
    "release_2026_12_tool_mode",
    "release_2026_12_tool_mode_waiting_on_tool",
    "session_catalog_session_between_turns",
    "session_catalog_session_streamed_continued",
    "tool_catalog_tool_mode",
)
_BEFORE_LATEST_RELEASE_RUNS = (
    "before_release_2026_12_06_agent_code_mode",
    "before_release_2026_12_06_code_mode",
    "before_release_2026_12_06_code_mode_paused_on_tool",
    "before_release_2026_12_06_session_between_turns",
    "before_release_2026_12_06_session_continued_carried_tools",
    "before_release_2026_12_06_session_failed_turn_continued",
    "before_release_2026_12_06_session_streamed_continued",
    "before_release_2026_12_06_tool_mode",
    "before_release_2026_12_06_tool_mode_waiting_on_tool",
)
"""Runs and sessions recorded on the build before ``RELEASE_2026_12_06_PATCH`` (the 0.2.0 release marker, the
worker's quota plan, approvers notified, calls carrying their program)."""
_LATEST_RELEASE_RUNS = (
    "release_2026_12_06_code_mode",
    "release_2026_12_06_code_mode_paused_on_tool",
    "release_2026_12_06_quota_tool_mode",
    "release_2026_12_06_session_between_turns",
    "release_2026_12_06_session_failed_turn_continued",
    "release_2026_12_06_session_streamed_continued",
    "release_2026_12_06_tool_mode",
    "release_2026_12_06_tool_mode_waiting_on_tool",
    "one_activity_a_step_session_between_turns",
)
"""Runs and sessions recorded with ``RELEASE_2026_12_06_PATCH`` (their first model call asks the quota plan); the
last, a session whose weather lookup carried its next model call (``contracts/llm/next_call.py``)."""
_PRE_RELEASE_SESSIONS = (
    "search_attributes_session_between_turns",
    "search_attributes_session_streamed_continued",
    "session",
    "session_between_turns",
    "session_continued_carried_tools",
    "session_failed_turn_continued",
    "session_streamed_continued",
)
_PRE_SEARCH_ATTRIBUTES_SESSIONS = (
    "session",
    "session_between_turns",
    "session_continued_carried_tools",
    "session_failed_turn_continued",
    "session_streamed_continued",
)


PATCHES: tuple[Patch, ...] = (
    Patch(
        id=REFUSAL_REPROMPTED_ONCE,
        added="one re-prompt after a refusal (commit 26b4b9d, 2026-11-30, before 0.2.0)",
        old_branch_does="re-prompts a second refusal in a row, within the re-prompt budget",
        asked_at="the violation ladder, when a refusal follows a refusal (`second_refusal_degrades`)",
        under=_BOTH_RELEASES,
        marked=(),
        old_branch=("refusal_reprompted_twice",),
        may_go=_BEFORE_RELEASE + " Pipelines and the monitor never take the release: they ask it as before, so "
        "its `deprecate_patch` step applies to them (a pipeline or tick lasts minutes).",
    ),
    Patch(
        id=PATCH_TOOL_RESULT_CAP,
        added="MCP fidelity (commit 9ecada9, 2026-11-30, before 0.2.0)",
        old_branch_does="tool-mode results go to the model whole, not cut to `AgentSpec.tool_result_chars`",
        asked_at="after an agent run's first tool step (`Features.tool_result_cap`)",
        under=_BOTH_RELEASES,
        marked=(
            "at_most_once_retried_after_the_call",
            "conversation_ref_tool_mode",
            "search_attributes_session_between_turns",
            "search_attributes_session_streamed_continued",
            "search_attributes_tool_mode",
            "session",
            "session_between_turns",
            "session_continued_carried_tools",
            "session_streamed_continued",
        ),
        old_branch=("agent_tool_mode", "tool_mode"),
        may_go=_BEFORE_RELEASE,
    ),
    Patch(
        id=EFFECTS_PATCH,
        added="issue 13 (commit f36b644, 2026-11-30, before 0.2.0)",
        old_branch_does=(
            "no effect ledger: tool calls keyed `<run id>:<call>` and never answered from a record, model calls "
            "without token reservations, a pipeline without delivery policies, the monitor's record unbounded"
        ),
        asked_at="an agent run's start (`Features.at_start`); a pipeline's and a monitor tick's start (`effects_once`)",
        under=_BOTH_RELEASES,
        marked=(
            *_EXACTLY_ONCE_EVIDENCE,
            *_CONVERSATION_REF_RUNS,
            "release_2026_12_monitor_tick",
            "release_2026_12_pipeline",
            *_SEARCH_ATTRIBUTES_AGENT_RUNS,
            "search_attributes_monitor_tick",
            "search_attributes_pipeline",
            *_PRE_RELEASE_SESSIONS,
        ),
        old_branch=(*_BEFORE_ANY_PATCH_AGENT_RUNS, "monitor", "monitor_tick", "pipeline", "pipeline_before_effects"),
        may_go=_BEFORE_RELEASE + " For agent runs only: a pipeline and a monitor tick ask it at every start, "
        "release or not, so there it becomes `deprecate_patch` once no pipeline or tick started before f36b644's "
        "workers is open, and goes once none carrying the marker is (fold it into the next release id first).",
    ),
    Patch(
        id=APPROVALS_PATCH,
        added="human approval of tools (commit d2d097c, 2026-11-30, before 0.2.0)",
        old_branch_does="runs a tool that requires approval without waiting for one",
        asked_at="an agent run's first call to a tool that requires approval (`Features.approvals`)",
        under=_BOTH_RELEASES,
        marked=(
            "approval_asked_again_for_a_recorded_effect",
            "search_attributes_session_streamed_continued",
            "session_failed_turn_continued",
            "session_streamed_continued",
        ),
        old_branch=(),
        may_go=_BEFORE_RELEASE + " No recorded history takes its old branch (no run before it had such a tool).",
    ),
    Patch(
        id=APPROVALS_CARRIED_PATCH,
        added="sessions carry their decisions (commit aa8c16d, 2026-11-30, before 0.2.0)",
        old_branch_does="a session's continue-as-new forgets its latest approval decisions",
        asked_at=(
            "a session's continue-as-new, every time, in a run recorded before `RELEASE_2026_12_06_PATCH` "
            "(`carries_decisions`)"
        ),
        under=_LATEST_RELEASE,
        marked=(
            "before_release_2026_12_06_session_failed_turn_continued",
            "before_release_2026_12_06_session_streamed_continued",
            "release_2026_12_session_streamed_continued",
            "search_attributes_session_streamed_continued",
            "session_catalog_session_streamed_continued",
            "session_failed_turn_continued",
            "session_streamed_continued",
        ),
        old_branch=(),
        may_go="`deprecate_patch` when no session run started before commit aa8c16d's workers is open (sessions "
        "continue as new, so count open SessionWorkflow runs by StartTime); the call goes when no open run "
        "carries its marker, i.e. never while sessions continue with it: folded into `RELEASE_2026_12_06_PATCH`, "
        "so once no open session run predates that release, it goes with that release's old branch.",
    ),
    Patch(
        id=CONVERSATION_REF_PATCH,
        added="one-shot runs store their conversation (commit 4c19c61, 2026-11-30, before 0.2.0)",
        old_branch_does="a one-shot run sends every `llm.call` its whole history (no stored conversation)",
        asked_at="a one-shot run's start, after `EFFECTS_PATCH` (`Features.at_start`)",
        under=_BOTH_RELEASES,
        marked=(*_EXACTLY_ONCE_EVIDENCE, *_CONVERSATION_REF_RUNS, *_SEARCH_ATTRIBUTES_AGENT_RUNS),
        old_branch=_BEFORE_ANY_PATCH_AGENT_RUNS,
        may_go=_BEFORE_RELEASE,
    ),
    Patch(
        id=TOKEN_STREAM_PATCH,
        added="session token streaming (commit c205941, 2026-11-30, before 0.2.0)",
        old_branch_does="a session with `stream_tokens` never asks `llm.call` to stream",
        asked_at="the first model call of a streaming session turn (`Features.token_stream`)",
        under=_BOTH_RELEASES,
        marked=("search_attributes_session_streamed_continued", "session_streamed_continued"),
        old_branch=(),
        may_go=_BEFORE_RELEASE + " No recorded history takes its old branch.",
    ),
    Patch(
        id=EXACTLY_ONCE_PATCH,
        added="issue 22 (commit dd91f8a, 2026-12-01, before 0.2.0)",
        old_branch_does=(
            "an at-most-once call is retried after any activity failure and a cancel during it is an unknown "
            "outcome; a recorded call to a tool that requires approval is asked for approval again"
        ),
        asked_at=(
            "only on the changed branches: an at-most-once call's failure (`cancel_ends_at_most_once_call`, "
            "`retries_at_most_once_after_any_failure`), a recorded call needing approval "
            "(`Features.asks_approval_again`)"
        ),
        under=_BOTH_RELEASES,
        marked=(),
        old_branch=_EXACTLY_ONCE_EVIDENCE,
        may_go=_BEFORE_RELEASE,
    ),
    Patch(
        id=SEARCH_ATTRIBUTES_PATCH,
        added="issue 26 (commit 4361d7b, 2026-12-01, before 0.2.0)",
        old_branch_does="runs and sessions upsert no `AgentSteps*` search attributes",
        asked_at="a run's or session run's start, before its first command (`keeps_search_attributes`)",
        under=_BOTH_RELEASES,
        marked=(
            *_SEARCH_ATTRIBUTES_AGENT_RUNS,
            "search_attributes_session_between_turns",
            "search_attributes_session_streamed_continued",
        ),
        old_branch=(
            *_CONVERSATION_REF_RUNS,
            *_EXACTLY_ONCE_EVIDENCE,
            *_BEFORE_ANY_PATCH_AGENT_RUNS,
            *_PRE_SEARCH_ATTRIBUTES_SESSIONS,
        ),
        may_go=_BEFORE_RELEASE,
    ),
    Patch(
        id=SESSION_STATE_PATCH,
        added="issue 21 (commit 6eb6413, 2026-12-01, before 0.2.0)",
        old_branch_does=(
            "a session run describes its tools before anything else (never takes carried schemas), and a failing "
            "call leaves its sibling calls running"
        ),
        asked_at="a session run's start (`takes_carried_tools`); the first failed call of a step (`cancel_siblings`)",
        under=_BOTH_RELEASES,
        marked=("session_continued_carried_tools", "session_failed_turn_continued"),
        old_branch=(
            "search_attributes_session_between_turns",
            "search_attributes_session_streamed_continued",
            "session",
            "session_between_turns",
            "session_streamed_continued",
        ),
        may_go=_BEFORE_RELEASE,
    ),
    Patch(
        id=RELEASE_PATCH,
        added="issue 23, release 0.2.0 (commit 1d14598, 2026-12-01)",
        old_branch_does="asks each id above where it always was (one marker and one upsert per id taken)",
        asked_at=(
            "an agent run's start and each session turn's start, right after `RELEASE_2026_12_06_PATCH` "
            "(`Features.at_start`, `keeps_search_attributes`)"
        ),
        under=_LATEST_RELEASE,
        marked=(*_RELEASE_RUNS, *_BEFORE_LATEST_RELEASE_RUNS, "quota_from_worker_quota_tool_mode"),
        old_branch=(
            *_CONVERSATION_REF_RUNS,
            *_EXACTLY_ONCE_EVIDENCE,
            *_BEFORE_ANY_PATCH_AGENT_RUNS,
            *_SEARCH_ATTRIBUTES_AGENT_RUNS,
            *_PRE_RELEASE_SESSIONS,
        ),
        may_go=(
            "with the ids `under` it, which are its old branch, on their condition (every open run "
            "started on 0.2.0 workers or later); then `deprecate_patch(RELEASE_PATCH)` at the same point, and the "
            "call goes once no open run carries its marker. A later release's command changes take a new release "
            "id, asked first in the same way (`RELEASE_2026_12_06_PATCH`)."
        ),
    ),
    Patch(
        id=APPROVAL_NOTIFY_PATCH,
        added="issue 38, approvals that reach people (commit on branch approvals, 2026-12-06)",
        old_branch_does=(
            "a call waiting for approval schedules nothing: no `approval.notify` activity, one timer for its "
            "whole wait (no reminder timer)"
        ),
        asked_at=(
            "each call that starts waiting for approval, in a run recorded before `RELEASE_2026_12_06_PATCH` "
            "(`ApprovalDesk.gate`, `notifies_approvers`)"
        ),
        under=_LATEST_RELEASE,
        marked=(
            "before_release_2026_12_06_session_failed_turn_continued",
            "before_release_2026_12_06_session_streamed_continued",
        ),
        old_branch=(
            "approval_asked_again_for_a_recorded_effect",
            "release_2026_12_session_streamed_continued",
            "search_attributes_session_streamed_continued",
            "session_catalog_session_streamed_continued",
            "session_failed_turn_continued",
            "session_streamed_continued",
        ),
        may_go="`deprecate_patch` when no run or session started before these workers waits for approval "
        "(`temporal workflow count --query 'AgentStepsAwaitingApproval = true AND StartTime < \"<that deploy>\"'` "
        "is 0); the call goes once no open run carries its marker (folded into `RELEASE_2026_12_06_PATCH`).",
    ),
    Patch(
        id=QUOTA_FROM_WORKER_PATCH,
        added="issue 36 item 1, the worker decides quotas and budgets (commit on branch budget, 2026-12-06)",
        old_branch_does=(
            "takes the quota plan (accounts, prices, degradation chain) its caller put in the input, with no "
            "`quota.plan` local activity"
        ),
        asked_at=(
            "an agent run's start, after its tenant is checked, and each session run's start, in a run recorded "
            "before `RELEASE_2026_12_06_PATCH` (`quotas_from_worker`, from `quota_gate.worker_plan`)"
        ),
        under=_LATEST_RELEASE,
        marked=(*_BEFORE_LATEST_RELEASE_RUNS, "quota_from_worker_quota_tool_mode"),
        # Every agent run and session recorded so far asks it at its start (the quota one took its input's plan).
        old_branch=(
            *_BEFORE_ANY_PATCH_AGENT_RUNS,
            *_CONVERSATION_REF_RUNS,
            *_SEARCH_ATTRIBUTES_AGENT_RUNS,
            *_EXACTLY_ONCE_EVIDENCE,
            *_RELEASE_RUNS,
            *_PRE_RELEASE_SESSIONS,
        ),
        may_go=(
            "when no run or session run started before the workers that ask it is open (a session continued "
            "since is a new run and asks it); then `deprecate_patch(QUOTA_FROM_WORKER_PATCH)` at the same point "
            "(the plan always from the activity, `AgentInput.quota` never read), and the call goes once no open "
            "run carries its marker."
        ),
    ),
    Patch(
        id=CODE_CALL_CARRIES_PROGRAM_PATCH,
        added="issue 39, a sequential code-mode call at one activity (commit on branch codemode2, 2026-12-06)",
        old_branch_does=(
            "every pause of a kept-live program is resumed by a `code.resume` local activity after its calls; "
            "`tools.call` carries no program and returns no next pause"
        ),
        asked_at=(
            "a kept-live program's first pause that waits on one tool call alone, before that call's "
            "`tools.call` is scheduled, in a run recorded before `RELEASE_2026_12_06_PATCH` (`calls_carry_programs`, "
            "from `program_driver.drive_program`)"
        ),
        under=_LATEST_RELEASE,
        marked=(
            "before_release_2026_12_06_agent_code_mode",
            "before_release_2026_12_06_code_mode",
            "before_release_2026_12_06_code_mode_paused_on_tool",
        ),
        old_branch=(),
        may_go=(
            "`deprecate_patch` when no code-mode run or session started before these workers is open; the call "
            "goes once no open run carries its marker. A run that took it needs workers that carry programs in "
            "`tools.call` (a rollback past it fails their replay)."
        ),
    ),
    Patch(
        id=RELEASE_2026_12_06_PATCH,
        added="issue 39, the release gate after 0.2.0 (commit on branch steps, 2026-12-06)",
        old_branch_does=(
            "asks `RELEASE_PATCH` next, then each id added since where it always was (one marker and one upsert "
            "per id taken: the worker's quota plan at every start, approvers notified, a call carrying its "
            "program, a session carrying its decisions at every continue-as-new); takes its quota plan from a "
            "`quota.plan` local activity at its start, not from its first model call"
        ),
        asked_at=(
            "a run's and each session run's start, first (`keeps_search_attributes`, then `Features.at_start`); "
            "a pipeline or monitor tick only where an at-most-once call failed (`_since_release`)"
        ),
        under=(),
        marked=_LATEST_RELEASE_RUNS,
        old_branch=(
            *_BEFORE_ANY_PATCH_AGENT_RUNS,
            *_CONVERSATION_REF_RUNS,
            *_SEARCH_ATTRIBUTES_AGENT_RUNS,
            *_EXACTLY_ONCE_EVIDENCE,
            *_RELEASE_RUNS,
            *_BEFORE_LATEST_RELEASE_RUNS,
            *_PRE_RELEASE_SESSIONS,
            "quota_from_worker_quota_tool_mode",
        ),
        may_go=(
            "with the ids `under` it, which are its old branch, once no run or session run started before its "
            'workers were deployed is open (`temporal workflow count --query \'ExecutionStatus="Running" AND '
            'StartTime < "<that deploy>"\'` is 0); then `deprecate_patch(RELEASE_2026_12_06_PATCH)` at the same '
            "point, and the call goes once no open run carries its marker. A command change after it ships takes "
            "a new release id, asked first in the same way."
        ),
    ),
)
"""In the order they were added."""

__all__ = ["PATCHES", "Patch"]
