"""Every workflow, activity, query, signal, update and patch name the engine uses.

These strings are persisted compatibility data, not labels:

- Temporal writes them into every run's history; a worker replaying a run in
  flight looks its workflow and each scheduled activity up by these names, so
  renaming one makes every open run of the old name fail (non-determinism or
  "activity type not registered").
- Backends in any language start runs and send queries/signals by name
  (``client.start_workflow("AgentWorkflow", ...)``, ``temporal workflow start
  --type AgentWorkflow``), and schedule files name their workflow.

So: nothing else in the code types one of these strings, and a change here is
a breaking, versioned change (keep the old name registered until its runs end).
"""

from __future__ import annotations

# ---------------------------------------------------------------- workflows
AGENT_WORKFLOW = "AgentWorkflow"
PIPELINE_WORKFLOW = "PipelineWorkflow"
MONITOR_WORKFLOW = "StalledTicketMonitor"
SESSION_WORKFLOW = "SessionWorkflow"
QUOTA_ACCOUNT_WORKFLOW = "QuotaAccount"
"""One per configured quota and per tenant with a budget (``agentsteps-quota-NAME``, ``agentsteps-tenant-NAME``)."""

# ---------------------------------------------------------------- activities
LLM_CALL = "llm.call"
LLM_CALL_RESOLVING_TOOLS = "llm.call.resolving_tools"
"""``llm.call`` for a request that names its tools instead of carrying them (a one-shot tool-mode run's
first call). Its own name, so a worker older than tool-name resolution never takes it: Temporal retries
the task until an upgraded worker does, and no model is ever called without the run's tools."""
LLM_CALL_STORED_RESULTS = "llm.call.stored_results"
"""``llm.call`` for a request whose tool messages name their stored copies (``LLMRequest.stored_messages``)
instead of carrying their content, so a tool result is in history once (the ``tools.call`` result). Its own
name, so a worker older than it never takes it and no model ever reads a tool message without its content."""
LLM_CALL_TOOL_CATALOG = "llm.call.tool_catalog"
"""``llm.call`` for a request that names the run's stored tool catalog (``LLMRequest.tools_ref``) instead of
carrying the schemas; such a request may also carry ``stored_messages``. Its own name, so a worker older than
catalogs never takes it and no model is ever called without the run's tools."""
LLM_CALL_PLAN_FIRST = "llm.call.plan_first"
"""The first model call of a run that does not know its quota plan yet (``PlanFirstInput``: any request the
other ``llm.call`` names take, and the run's tenant). The worker looks up its own plan for the tenant first:
with none, the call is made; with one, nothing is sent and the plan comes back (``PlanFirstAnswer``), and the
run makes the call again under it. Its own name, so a worker that cannot decide quotas never takes it."""
MODEL_CALLS = frozenset(
    {LLM_CALL, LLM_CALL_RESOLVING_TOOLS, LLM_CALL_STORED_RESULTS, LLM_CALL_TOOL_CATALOG, LLM_CALL_PLAN_FIRST}
)
"""Every name a model call of its own has in a run's history: a reader of model replies asks for all of them, and
for a tool-mode step's ``tools.call`` results too (a model call a tool call carried answers in its
``CarryingCallResult.next_answer``)."""
TOOLS_DESCRIBE = "tools.describe"
TOOLS_CALL = "tools.call"
CODE_CHECK = "code.check"
CODE_START = "code.start"
CODE_RESUME = "code.resume"
CODE_FORK = "code.fork"
SESSION_FORK = "session.fork"
"""A session fork's first activity: the source session's conversation and REPL memory, checked against
the source and bound to the fork (``activities/session_fork.py``)."""
MONITOR_RECORD = "monitor.record"
APPROVAL_NOTIFY = "approval.notify"
"""Takes ``ApprovalNotice``; posts it to the webhooks configured for its tool or agent (``approval_webhooks``)."""
APPROVAL_TARGETS = "approval.targets"
"""A local activity at a run's first waiting call: the filters of the worker's webhooks (``ApprovalTargets``)."""
QUOTA_PLAN_ACTIVITY = "quota.plan"
"""A local activity at a run's start: its quotas, budget, prices and degradation chain from the worker's config
(``activities/quotas``), recorded in its history; nothing the caller sends decides them. Runs recorded before
``RELEASE_2026_12_06_PATCH``; since, the plan rides on the first model call (``LLM_CALL_PLAN_FIRST``)."""

# ---------------------------------------------------------------- AgentWorkflow queries and signals
STATE_QUERY = "state"
"""Returns ``AgentState``."""
STEPS_QUERY = "steps"
"""Takes ``since: int``; returns ``list[Step]`` from that index on."""
CANCEL_SIGNAL = "cancel"
"""Graceful cancel: the run stops before its next step and returns what it has."""

# ---------------------------------------------------------------- quotas (docs/quotas.md)
QUOTA_ACQUIRE_SIGNAL = "quota_acquire"
"""Run -> account: a ``LeaseRequest``. Workflows cannot send each other Updates, so both ways are signals."""
QUOTA_RELEASE_SIGNAL = "quota_release"
"""Run -> account: a ``LeaseRelease`` (the call's real use) once the call ended."""
QUOTA_GRANT_SIGNAL = "quota_grant"
"""Account -> run (AgentWorkflow, SessionWorkflow): a ``LeaseGrant``, or the refusal."""
QUOTA_VIEW_QUERY = "quota_view"
"""Returns ``AccountView``: the live limits and their use."""
QUOTA_SET_UPDATE = "set_limits"
"""Takes ``LimitChange``; returns ``AccountView``. An operator raises (or lowers) a live limit."""

# ---------------------------------------------------------------- queue registry (docs/deployment.md)
QUEUE_REGISTRY_WORKFLOW = "QueueRegistry"
"""One per task queue (``queue_registry_id``): the queue's fingerprint and its workers' leases."""
QUEUE_REGISTRY_TASK_QUEUE = "agentsteps-queue-registry"
"""Where every agentsteps worker process serves the registries, before it polls its own queue."""
QUEUE_JOIN_UPDATE = "queue_join"
"""Takes ``JoinRequest``; returns ``JoinAnswer``. Also a member's lease renewal."""
QUEUE_LEAVE_SIGNAL = "queue_leave"
"""Takes the leaving worker's id (a string): its lease ends now, not when it runs out."""
QUEUE_REGISTRY_QUERY = "queue_registry"
"""Returns ``RegistryState``."""

# ---------------------------------------------------------------- SessionWorkflow updates and queries
# The session also answers STATE_QUERY (with ``SessionState``) and CANCEL_SIGNAL (stops the running turn).
TURN_UPDATE = "turn"
"""Takes ``TurnInput`` (``{"input": "..."}``); returns ``TurnResult``."""
CLOSE_UPDATE = "close"
"""Takes ``CloseInput`` (``{"reason": "..."}``, optional); returns ``SessionState``."""
REWIND_UPDATE = "rewind"
"""Takes ``RewindInput`` (``{"to_turn": N}``); returns ``SessionState``. The undone turns stay in ``rewinds``."""
TURNS_QUERY = "turns"
"""Returns ``list[TurnSummary]``."""
FORK_SOURCE_QUERY = "fork_source"
"""Returns ``ForkSource``: the turn checkpoints and effects a fork of one of its turns starts from."""
"""Returns ``list[TurnSummary]``."""
CURRENT_TURN_QUERY = "current_turn"
"""Returns the running turn's ``AgentState``, or null between turns."""
# A session answers STEPS_QUERY too: the running turn's steps, else the last turn's (while this
# workflow run holds it in memory: not across continue-as-new or a worker's cache eviction).

# ---------------------------------------------------------------- approvals (AgentWorkflow and SessionWorkflow)
APPROVE_UPDATE = "approve"
"""Takes ``ApprovalDecision`` (``{"approval_id": ..., "note": ..., "approver": ...}``); returns ``ApprovalRecord``."""
REJECT_UPDATE = "reject"
"""As ``approve``; the call does not run and the model reads the rejection as the tool's error."""
APPROVALS_QUERY = "approvals"
"""Returns ``list[PendingApproval]``: the calls waiting for a person."""
DECISIONS_QUERY = "decisions"
"""Returns ``list[ApprovalRecord]``: the latest decisions (at most 200), so a late second decision is told
who decided first, and when, even after the run ended."""

# ---------------------------------------------------------------- progress stream (temporalio.contrib.workflow_streams)
PROGRESS_TOPIC = "progress"
"""A session's ``ProgressEvent`` items: turn start and end, steps, tool calls, approvals, usage, and
(``stream_tokens``) the answer's text, published by the ``llm.call`` activity."""

# ---------------------------------------------------------------- workflow.patched ids
# A patch id marks, in a run's history, that a change to the commands a
# workflow issues was live when the run took that branch; runs started before
# the change replay the old branch. Never reuse or rename one. Each id's row
# (who added it, the recorded histories that need it, when it may go) is in
# workflows/releases/registry.py, and its question in workflows/releases/gates.py.
EFFECTS_PATCH = "agentsteps.effects-once.1"
"""Issue 13: effect keys from the workflow id and the call's content (not the run id), the
run's record of effects, delivery policies, token reservations, the monitor's record retry.
Runs recorded without its marker keep the old commands when they replay."""
EXACTLY_ONCE_PATCH = "agentsteps.exactly-once.2"
"""Issue 22, asked only on the branches whose commands changed (so most runs never carry its marker):
an at-most-once call retried only after ``ToolNotSentError`` (any other failure is an unknown outcome)
and a workflow cancel during it cancelling the run; a recorded effect never asked for approval again.
Runs recorded without its marker replay the old commands."""
REFUSAL_REPROMPTED_ONCE = "refusal-reprompted-once"
"""The ladder degrades on the second refusal in a row instead of re-prompting again."""
APPROVALS_PATCH = "approvals-v1"
"""Runs recorded before approvals existed called every tool at once; they replay that way."""
APPROVALS_CARRIED_PATCH = "approvals-carried-v1"
"""A session carries its latest approval decisions across continue-as-new (runs before it forgot them)."""
TOKEN_STREAM_PATCH = "token-stream-v1"
"""A session with ``stream_tokens`` asks ``llm.call`` to stream (runs before it never do)."""
PATCH_TOOL_RESULT_CAP = "tool-result-cap"
"""Tool-mode results are cut to ``AgentSpec.tool_result_chars`` (runs started before keep them whole)."""

CONVERSATION_REF_PATCH = "agentsteps.conversation-by-ref.1"
"""``AgentWorkflow`` sends each ``llm.call`` the stored conversation's ref plus only the messages
added since (as a session turn does), not the whole history; runs started before send it whole."""
SESSION_STATE_PATCH = "agentsteps.session-state.1"
"""Issue 21, one id for every change to a session's long-lived state: a continued session takes the
tool schemas it carries (describing again is lazy and fails at most a turn); carried state is accepted
only from the session's own continue-as-new; a failing turn (or one-shot run) cancels its sibling calls
and withdraws their approvals. Runs recorded without its marker replay the old commands."""

RELEASE_PATCH = "agentsteps.release.2026-12"
"""One id for a release's worth of changes: a run that takes it takes every behaviour gated by the ids
above (effects once, conversation by ref, the tool-result cap, approvals, token streaming, one re-prompt
after a refusal) and asks none of them, so a run pays one marker and one ``TemporalChangeVersion``
upsert instead of one of each per id (billable actions). New under it: a one-shot tool-mode run's
first ``llm.call`` resolves its tool names (no ``tools.describe`` activity), and runs and sessions keep
the console's search attributes (``SEARCH_ATTRIBUTES_PATCH`` unasked). Runs recorded before it ask the ids above
where they always did. A command change after this release ships needs a new id."""
SEARCH_ATTRIBUTES_PATCH = "agentsteps.search-attributes.1"
"""Runs and sessions keep the ``AgentSteps*`` search attributes below up to date (a few upserts a
run: start, approval asked/decided, end); runs started before replay without them."""
APPROVAL_NOTIFY_PATCH = "agentsteps.approval-notify.1"
"""Issue 38: a call that starts waiting schedules ``approval.notify`` (and a reminder timer before its timeout)."""
QUOTA_FROM_WORKER_PATCH = "agentsteps.quota-from-worker.1"
"""Issue 36: a run (and each session run) takes its quota plan from the ``quota.plan`` local activity, the
worker's own config, and ignores a plan in its input; runs recorded before it replay the plan their caller
sent. Not under the release: every run asks it at its start."""
CODE_CALL_CARRIES_PROGRAM_PATCH = "agentsteps.code-call-carries-program.1"
"""Issue 39: a tool call a kept-live program waits on alone carries the program (``CarriedProgram``), and its
``tools.call`` activity resumes it: no ``code.resume`` local activity for that pause when it answers with the
next one. Not under the release: asked at a program's first such call."""

RELEASE_2026_12_06_PATCH = "agentsteps.release.2026-12-06"
"""The next release's one id, asked first at a run's (and each session run's) start, before
``RELEASE_PATCH``: a run that takes it takes everything ``RELEASE_PATCH`` covers and every behaviour gated
by the ids added since (the worker's quota plan, approvers notified, a call that carries its program) or
asked at every continue-as-new (a session carrying its decisions), and asks none of them: one marker and one
``TemporalChangeVersion`` upsert a run. New under it: the quota plan rides on the run's first model call
(``LLM_CALL_PLAN_FIRST``) instead of a ``quota.plan`` local activity at every start. Runs recorded before it
ask ``RELEASE_PATCH`` and each later id where they always did. A command change after it ships needs a new id."""

# ---------------------------------------------------------------- search attributes (Temporal visibility)
# Registered on the embedded dev server by ``client/dev_server.py``; on a cluster with
# ``temporal operator search-attribute create`` (docs/deployment.md). The worker checks them at start.
SA_SPEC = "AgentStepsSpec"
SA_MODEL = "AgentStepsModel"
SA_STEPS = "AgentStepsSteps"
SA_TOKENS = "AgentStepsTokens"
SA_VIOLATIONS = "AgentStepsViolations"
SA_COST = "AgentStepsCostUsd"
SA_AWAITING_APPROVAL = "AgentStepsAwaitingApproval"
SA_LAST_ACTIVITY = "AgentStepsLastActivity"
SA_TENANT = "AgentStepsTenant"
SEARCH_ATTRIBUTES: dict[str, str] = {
    SA_SPEC: "Keyword",
    SA_MODEL: "Keyword",
    SA_STEPS: "Int",
    SA_TOKENS: "Int",
    SA_VIOLATIONS: "Int",
    SA_COST: "Double",
    SA_AWAITING_APPROVAL: "Bool",
    SA_LAST_ACTIVITY: "Datetime",
    SA_TENANT: "Keyword",
}
"""Name -> Temporal's type name. The SQL visibility of the dev server allows 3 Int attributes per
namespace: these take all three."""

WORKFLOWS = (AGENT_WORKFLOW, PIPELINE_WORKFLOW, MONITOR_WORKFLOW, SESSION_WORKFLOW, QUOTA_ACCOUNT_WORKFLOW)
ACTIVITIES = (
    LLM_CALL,
    LLM_CALL_RESOLVING_TOOLS,
    LLM_CALL_STORED_RESULTS,
    LLM_CALL_TOOL_CATALOG,
    LLM_CALL_PLAN_FIRST,
    TOOLS_DESCRIBE,
    TOOLS_CALL,
    CODE_CHECK,
    CODE_START,
    CODE_RESUME,
    CODE_FORK,
    SESSION_FORK,
    MONITOR_RECORD,
    APPROVAL_NOTIFY,
    APPROVAL_TARGETS,
    QUOTA_PLAN_ACTIVITY,
)

__all__ = [
    "ACTIVITIES",
    "AGENT_WORKFLOW",
    "APPROVALS_CARRIED_PATCH",
    "SESSION_STATE_PATCH",
    "APPROVALS_QUERY",
    "APPROVE_UPDATE",
    "DECISIONS_QUERY",
    "CANCEL_SIGNAL",
    "CLOSE_UPDATE",
    "CURRENT_TURN_QUERY",
    "CODE_CHECK",
    "CODE_FORK",
    "CODE_RESUME",
    "CODE_START",
    "CODE_CALL_CARRIES_PROGRAM_PATCH",
    "CONVERSATION_REF_PATCH",
    "EFFECTS_PATCH",
    "EXACTLY_ONCE_PATCH",
    "FORK_SOURCE_QUERY",
    "LLM_CALL",
    "LLM_CALL_RESOLVING_TOOLS",
    "LLM_CALL_STORED_RESULTS",
    "LLM_CALL_TOOL_CATALOG",
    "LLM_CALL_PLAN_FIRST",
    "MONITOR_RECORD",
    "APPROVAL_NOTIFY",
    "APPROVAL_NOTIFY_PATCH",
    "APPROVAL_TARGETS",
    "MONITOR_WORKFLOW",
    "PATCH_TOOL_RESULT_CAP",
    "PIPELINE_WORKFLOW",
    "PROGRESS_TOPIC",
    "QUOTA_ACCOUNT_WORKFLOW",
    "QUOTA_ACQUIRE_SIGNAL",
    "QUOTA_FROM_WORKER_PATCH",
    "QUOTA_PLAN_ACTIVITY",
    "QUOTA_GRANT_SIGNAL",
    "QUOTA_RELEASE_SIGNAL",
    "QUOTA_SET_UPDATE",
    "QUOTA_VIEW_QUERY",
    "REJECT_UPDATE",
    "RELEASE_PATCH",
    "RELEASE_2026_12_06_PATCH",
    "REWIND_UPDATE",
    "SESSION_FORK",
    "SESSION_WORKFLOW",
    "REFUSAL_REPROMPTED_ONCE",
    "SA_AWAITING_APPROVAL",
    "SA_COST",
    "SA_LAST_ACTIVITY",
    "SA_MODEL",
    "SA_SPEC",
    "SA_TENANT",
    "SA_STEPS",
    "SA_TOKENS",
    "SA_VIOLATIONS",
    "SEARCH_ATTRIBUTES",
    "SEARCH_ATTRIBUTES_PATCH",
    "STATE_QUERY",
    "STEPS_QUERY",
    "TOKEN_STREAM_PATCH",
    "TOOLS_CALL",
    "TOOLS_DESCRIBE",
    "TURNS_QUERY",
    "TURN_UPDATE",
    "WORKFLOWS",
]
