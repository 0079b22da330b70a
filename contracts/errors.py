"""The project's exception tree: every error it raises on purpose, in one place.

    AgentStepsError
    ├── InvalidSpecError           bad AgentSpec, config or pipeline file; names the field
    │   ├── ScheduleFileError          a schedule file that cannot be applied; names file and key
    │   └── QuotaConfigError           a quota or tenant budget table that cannot be enforced (at worker start)
    ├── ScheduleNotFoundError      no schedule with that id on the server
    ├── HistoryUnavailableError    a run's history the server no longer keeps (or never had)
    ├── RunNotFoundError           no run or session under that id on the server (never started, or past retention)
    ├── CompositionError           a pipeline's edges do not compose; carries an EdgeReport per edge
    ├── ContractViolationError     re-prompts and degradations spent; names contract, kind, path
    ├── BudgetExceededError        token or step budget spent, or a tenant's hard budget (names tenant and period)
    ├── ProviderError              an LLM provider answered badly
    │   ├── RetryableProviderError     408/409/429/5xx, timeouts, resets (Temporal retries)
    │   └── NonRetryableProviderError  400/401/403/404/422, malformed bodies
    ├── ToolError                  a tool's own failure; goes back to the model
    ├── ToolNotSentError           a tool call's request provably never left the worker (retried)
    ├── ToolConfigError            two tools share a name on the wire or in code mode (at start)
    ├── McpError                   an MCP server failed; ``retryable`` says how Temporal treats it
    │   ├── McpConfigError             unknown server, bad config file, missing secret, name collision
    │   ├── McpAuthError               the server rejected the credential
    │   ├── McpUnavailableError        cannot start or reach the server, lost, timed out, circuit open (retried)
    │   ├── McpServerDownError         down longer than the server's give_up_seconds (not retried)
    │   └── McpProtocolError           the server answered something that is not valid MCP
    ├── SnapshotIntegrityError     a code-mode snapshot is missing, altered or signed with another key
    ├── SnapshotKeyUnknownError    signed with a key id this worker lacks (a key rollout): retried, then waited for
    ├── PayloadIntegrityError      stored payload bytes no longer match their content address
    │   └── PayloadMissingError        a payload is not in (or not readable from) this worker's store
    ├── PayloadStoreDeniedError    the store refused this worker (credentials, policy): retried, the run left alone
    ├── DeploymentConfigError      a worker on a cluster without a shared payload store or snapshot key
    │   ├── ConsoleConfigError         the console bound beyond loopback with no token and no auth proxy
    │   └── QueueMismatchError         the queue's workers use another store, key, tools, models or quotas
    ├── StackConflictError         the local stack cannot do it: a port or the queue is taken, or nothing can serve it
    ├── InvalidProgramResume       a snapshot cannot take the outcomes it was resumed with
    ├── MonitorScanError           the monitor's scan program failed or returned a malformed value
    ├── ApprovalError              an approve/reject names no waiting call, one already decided, or is malformed
    ├── WebhookDeliveryError       an approval webhook did not accept a notice (retried until the call's deadline)
    └── SessionError               a session refused an Update before it reached history
        ├── InvalidTurnError           empty, over-size, garbage or wrongly typed turn input
        ├── SessionBusyError           a turn arrived while another turn was still running
        ├── TurnAlreadyAnsweredError   a turn resent under an update id a run before a continue-as-new answered
        ├── SessionClosedError         a turn or close arrived after the session was closed
        ├── SessionNotFoundError       no session under that id was ever started (or retention dropped it)
        ├── CarriedStateError          a session was started with carried state it does not own
        ├── StreamReadersFullError     a stream reader's long-poll Update past the few a session admits
        └── StreamPositionError        a stream reader's position (Last-Event-ID) is not a position

The ``McpError`` branch is defined in ``contracts/mcp.py``, beside the MCP
activity io it belongs to, and ``CompositionError`` in
``contracts/composition/contract.py``, beside the ``EdgeReport`` it carries;
everything else is defined here.

Contract violations themselves are values (``Violation``); these exceptions are
raised only once the workflow has run out of ways to handle them. Each class
name is also the Temporal ``ApplicationError`` type, so backends in any
language can match on it; the names are therefore persisted compatibility
data (``InvalidProgramResume`` keeps the name it has always had on the wire).
Each class says whether Temporal may retry it (``retryable``); ``failures/``
is the one seam that turns an error into an ``ApplicationError`` and back.
The table in docs/failures.md lists every type a run can fail with.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import ValidationError

from .json_schema import json_path
from .violations import Violation, ViolationKind


class AgentStepsError(Exception):
    """Base of every error this project raises on purpose."""

    retryable: ClassVar[bool | None] = False
    """How Temporal treats it: ``False`` fails at once (``non_retryable``: also what a refused Update
    says, so the ``temporal`` CLI never shows ``retryable: true`` for one), ``True`` is retried by the
    activity's policy, ``None`` leaves the flag unset."""

    details: tuple[Any, ...] = ()
    """What crossed Temporal with it: set on an error ``failures.from_failure`` rebuilt."""

    @classmethod
    def with_message(cls, message: str, details: tuple[Any, ...] = ()) -> Self:
        """This class with exactly ``message``, not the one its constructor would word.

        For a failure worded where it is raised, or rebuilt from Temporal; the
        fields the constructor sets (``violation``, ``edges``) stay unset.
        """
        error = cls.__new__(cls)
        Exception.__init__(error, message)
        error.details = details
        return error


class InvalidSpecError(AgentStepsError):
    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        what = violations[0].contract.replace("_", " ") if violations else "input"
        detail = "; ".join(f"{v.path}: {v.message}" for v in violations)
        super().__init__(f"invalid {what}: {detail}")

    @classmethod
    def from_validation(cls, exc: ValidationError, contract: str) -> InvalidSpecError:
        """One violation per pydantic error, each naming its field as a JSON path."""
        return cls(
            [
                Violation(
                    contract=contract,
                    phase="pre",
                    kind=ViolationKind.invalid_config,
                    path=json_path("$", e["loc"]),
                    message=e["msg"],
                )
                for e in exc.errors()
            ]
        )


class ContractViolationError(AgentStepsError):
    def __init__(self, violation: Violation) -> None:
        self.violation = violation
        super().__init__(
            f"contract {violation.contract!r} violated ({violation.kind.value} at {violation.path}): "
            f"{violation.message}"
        )


class BudgetExceededError(AgentStepsError):
    """A run's token or step budget, or its tenant's hard budget for a period, is spent; never retried.

    A tenant's refusal names the tenant and the period in its message and carries
    ``{"tenant": ..., "period": ...}`` as its failure details.
    """


class QuotaConfigError(InvalidSpecError):
    """``[worker.quotas]`` cannot be enforced (a bad number, a duplicate name, a soft limit above its hard one).

    Raised while the worker starts, naming the field, before it polls anything.
    """


class ProviderError(AgentStepsError):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class RetryableProviderError(ProviderError):
    retryable = True

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status)


class NonRetryableProviderError(ProviderError):
    pass


class ToolError(AgentStepsError):
    """Raise from a tool to report a domain failure the model should see."""


class ToolNotSentError(AgentStepsError):
    """A tool call failed before its request left the worker (the server could not be reached).

    The one failure after which an ``at_most_once`` call is tried again. Raised
    only by code that knows nothing was sent; any other failure of such a call
    (a timeout, a worker shut down mid-call, an error after the tool ran) is an
    unknown outcome, told to the model as ``ToolOutcomeUnknown``.
    """

    retryable = True


class ToolConfigError(AgentStepsError):
    """Tools that cannot be told apart once named for an API or a code-mode stub (``tool_name_collisions``).

    Raised at start (registering a Python tool, ``tools.describe`` for a run),
    never retried: one tool silently hiding another is the failure it prevents.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class SnapshotIntegrityError(AgentStepsError):
    """A stored snapshot is missing, altered, or signed with another key.

    Never retried: loading interpreter state nobody vouches for is the one
    thing the sandbox must refuse.
    """


class SnapshotKeyUnknownError(AgentStepsError):
    """A snapshot is signed with a key id this worker does not hold.

    During a key rollout a worker with the old configuration meets snapshots a
    new one signed: retried (the attempt, then the workflow waits and asks
    again, bounded), never the failure of a paused program that may already have
    applied effects. Counted as ``agentsteps_code_programs_total{outcome="key_unknown"}``.
    """

    retryable = True


class PayloadIntegrityError(AgentStepsError):
    """Stored bytes no longer match their content address; names the digest and the store."""


class PayloadMissingError(PayloadIntegrityError):
    """A referenced payload is not in the store this worker reads (or the store refuses it).

    The message names the digest and the store. Never retried: the bytes will
    not appear by waiting, and a run that needs them cannot go on.
    """


class PayloadStoreDeniedError(AgentStepsError):
    """The payload store refused this worker (AccessDenied, bad credentials, a bad signature): this pod's fault.

    Retried (the attempt fails, possibly taken by a healthy pod) and the run is left alone; counted as
    ``agentsteps_payload_store_denied_total`` (alert ``AgentStepsPayloadStoreDenied``)."""

    retryable = True


class DeploymentConfigError(AgentStepsError):
    """The worker's deployment settings cannot keep runs safe (raised before it starts)."""


class ConsoleConfigError(DeploymentConfigError):
    """The console's settings would expose it: bound beyond loopback without a token or an auth proxy."""


class QueueMismatchError(DeploymentConfigError):
    """Workers already on the task queue use another payload store, snapshot key, tools, models or quotas:
    this one is refused before it polls (``client/queue_membership.py``)."""


class StackConflictError(AgentStepsError):
    """A CLI process refused to start its part of the stack: a port is taken by something that is not
    the Temporal server it needs, another worker with other tools or models polls the task queue, or
    nothing could ever serve the work it was asked to start."""


class InvalidProgramResume(AgentStepsError):
    """A paused program rejected the call outcomes it was resumed with."""


class MonitorScanError(AgentStepsError):
    """The monitor's scan program failed, or returned something that is not a scan result."""


class ApprovalError(AgentStepsError):
    """An ``approve`` / ``reject`` Update was refused: unknown or already decided ``approval_id``, bad shape.

    Not retryable: the same decision is refused again; fix the id or the shape."""


class WebhookDeliveryError(AgentStepsError):
    """An approval webhook refused or did not answer a notice (``approval.notify``); names the webhook, never
    its URL. Retried (the receiver dedups on the delivery id) until the waiting call's own deadline."""

    retryable = True


class SessionError(AgentStepsError):
    """A session refused an Update (the validator's answer; nothing reaches history).

    Not retryable as sent: resending the same Update at once is refused the same way (a busy
    session's turn is sent again when the running turn ends, by the caller who knows it)."""


class InvalidTurnError(SessionError):
    """The turn's input is empty, over the session's limit, holds control characters or has the wrong shape."""


class SessionBusyError(SessionError):
    """Turns are serial: another turn is still running. Send this one when it ends."""


class TurnAlreadyAnsweredError(SessionError):
    """A turn was sent again under the update id of a turn the session already answered, in a run before
    it continued as new (within one run Temporal itself answers a repeated id with the first outcome). It is
    not run again; ``session_turns`` shows how it ended."""


class SessionClosedError(SessionError):
    """The session was closed (by ``close`` or its idle timeout) and takes no more turns."""


class SessionNotFoundError(SessionError):
    """No session under this id was ever started (or the namespace's retention dropped it).

    Distinct from ``SessionClosedError``: nothing ended, there is nothing under the id.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f"no session {session_id!r} exists (never started, or past the namespace's retention); "
            "start one with send_turn (agentsteps chat --spec FILE)"
        )


class CarriedStateError(SessionError):
    """A session's input carried state (conversation, REPL memory, stream) that is not its own.

    Carried state is accepted only from the session's own continue-as-new; a
    starter that sends ``carried`` is refused and nothing of it is loaded.
    """


class StreamReadersFullError(SessionError):
    """A progress-stream reader asked for a long-poll Update while the few a session admits were taken.

    Temporal admits 10 Updates in flight per workflow; readers must never take the ones turns, approvals and
    close need. Follow a session with ``agentsteps.client.session_stream`` (queries, no Update) instead.
    """


class StreamPositionError(SessionError):
    """A stream reader's resume position (``Last-Event-ID``, ``after``) is not a whole number of at least -1."""


class ScheduleFileError(InvalidSpecError):
    """A schedule file that cannot be applied; ``field`` names the offending key (dotted)."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        violation = Violation(
            contract="schedule", phase="pre", kind=ViolationKind.invalid_config, path=field, message=message
        )
        super().__init__([violation])
        self.args = (f"{file}: {field}: {message}",)

    def __str__(self) -> str:
        return str(self.args[0])


class ScheduleNotFoundError(AgentStepsError):
    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(f"no schedule named {schedule_id!r}; run 'agentsteps schedule list'")


class HistoryUnavailableError(AgentStepsError):
    """A recorded run that time travel needs is gone: the server's retention dropped its history.

    ``next_step`` is what the caller can do instead (replay names ``--histories DIR``; a fork has no such
    flag, so it names the ids the server still has)."""

    def __init__(
        self,
        workflow_id: str,
        detail: str = "",
        next_step: str = "replay it from a saved history file instead (--histories DIR)",
    ) -> None:
        self.workflow_id = workflow_id
        super().__init__(
            f"the history of run {workflow_id!r} is not on the server: it never existed there, or the "
            f"namespace's retention period has passed since it closed{': ' + detail if detail else ''}; "
            f"{next_step}"
        )


class RunNotFoundError(AgentStepsError):
    """No run or session under this workflow id on the server: never started, or past retention."""

    def __init__(self, workflow_id: str, next_step: str = "check the id (agentsteps session list)") -> None:
        self.workflow_id = workflow_id
        super().__init__(
            f"no run or session {workflow_id!r} exists (never started, or past the namespace's retention); {next_step}"
        )


__all__ = [
    "AgentStepsError",
    "ApprovalError",
    "WebhookDeliveryError",
    "BudgetExceededError",
    "CarriedStateError",
    "ConsoleConfigError",
    "ContractViolationError",
    "DeploymentConfigError",
    "HistoryUnavailableError",
    "InvalidProgramResume",
    "InvalidSpecError",
    "InvalidTurnError",
    "MonitorScanError",
    "NonRetryableProviderError",
    "PayloadIntegrityError",
    "PayloadMissingError",
    "PayloadStoreDeniedError",
    "ProviderError",
    "QuotaConfigError",
    "RetryableProviderError",
    "RunNotFoundError",
    "ScheduleFileError",
    "ScheduleNotFoundError",
    "SessionBusyError",
    "TurnAlreadyAnsweredError",
    "SessionClosedError",
    "SessionError",
    "SessionNotFoundError",
    "SnapshotIntegrityError",
    "SnapshotKeyUnknownError",
    "QueueMismatchError",
    "StackConflictError",
    "ToolConfigError",
    "ToolError",
    "ToolNotSentError",
]
