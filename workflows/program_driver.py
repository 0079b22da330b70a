"""Driving a sandboxed program from a workflow: ``code.check``, ``code.start``, ``code.resume``.

The interpreter never runs in the workflow; between segments the program is
only a signed snapshot reference in history. Shared by code mode and the
monitor's fixed scan program.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from ..contracts import Violation
    from ..contracts.code.carried import CarriedProgram
    from ..contracts.code.program import (
        CallOutcome,
        CheckProgramInput,
        CheckProgramResult,
        ForkProgramInput,
        PendingCall,
        ProgramLimits,
        ProgramStatus,
        ResumeProgramInput,
        StartProgramInput,
    )
    from ..contracts.errors import SnapshotIntegrityError, SnapshotKeyUnknownError
    from ..contracts.names import CODE_CHECK, CODE_FORK, CODE_RESUME, CODE_START
    from ..contracts.persisted_ids import program_run_key
    from ..contracts.spec import ActivityPolicy
    from ..failures import from_failure, to_application_error
    from .activity_options import activity_options
    from .releases.gates import calls_carry_programs
    from .siblings import cancel_unfinished


class CallCarrier(Protocol):
    """Runs a call with the program waiting on it (``tools.call`` with ``CarriedProgram``): the call's outcome,
    and the program's next pause when the activity resumed it (None otherwise)."""

    def carries(self, call: PendingCall) -> bool:
        """Whether this call's activity may resume the program (a tool call that is not at-most-once)."""
        ...

    async def __call__(
        self, call: PendingCall, program: CarriedProgram
    ) -> tuple[CallOutcome, ProgramStatus | None]: ...


def program_keys(step: str) -> tuple[str, str | None]:
    """The key a program's snapshots are signed for, and the one builds before issue 22 used (or None).

    The chain's identity, not the run's: ``temporal workflow reset`` starts a new run id in the same chain,
    and the reset run must load the snapshots its replayed history refers to. The legacy key (the run id in
    place of the chain's first) is the same for a run that is its chain's first, so it is left out then.
    """
    info = workflow.info()
    key = program_run_key(info.workflow_id, info.first_execution_run_id, step)
    legacy = program_run_key(info.workflow_id, info.run_id, step)
    return key, (None if legacy == key else legacy)


SEGMENT_RETRY_SECONDS = 1.0
"""The wait before a failed segment's second attempt, doubling after. Replay never compares retry
policies, so a test's workers may shorten it (tests/support/scale_support.py)."""


def _segment_policy(limits: ProgramLimits) -> ActivityPolicy:
    # A segment is bounded by the interpreter's own limit; the margin covers
    # loading and storing a snapshot of several MB.
    return ActivityPolicy(
        start_to_close_seconds=limits.segment_seconds + 60.0,
        max_attempts=5,
        initial_interval_seconds=SEGMENT_RETRY_SECONDS,
    )


def _segment_options(limits: ProgramLimits) -> dict[str, Any]:
    # code.start / code.resume run as LOCAL activities: a sequential tool call
    # then costs one server round trip (tools.call), not two, since the segment
    # runs inside the workflow task and leaves a marker. This is safe because a
    # segment is short (the sandbox enforces segment_seconds), deterministic
    # from its snapshot, and free of side effects (those are tools.call, keyed).
    # A killed worker's segment is rerun from the same snapshot after the
    # workflow task timeout (10 s default), which replaces the heartbeat timeout;
    # a hung one is cut by start_to_close and retried in-process (backoffs stay
    # under local_retry_threshold). Inputs and results over 256 KiB still go
    # through ExternalStorage: the activity worker encodes the result and the
    # workflow completion encodes the input, as for any activity.
    return {**activity_options(_segment_policy(limits)), "local_retry_threshold": timedelta(minutes=1)}


async def check_program(program: str, stubs: str, limits: ProgramLimits) -> list[Violation]:
    """Syntax and types against the stubs, before anything runs."""
    checked: CheckProgramResult = await workflow.execute_activity(
        CODE_CHECK,
        CheckProgramInput(program=program, stubs=stubs),
        result_type=CheckProgramResult,
        summary="check program",
        heartbeat_timeout=timedelta(seconds=5),
        **activity_options(_segment_policy(limits)),
    )
    return checked.violations


async def drive_program(
    start: StartProgramInput,
    run_call: Callable[[PendingCall], Awaitable[CallOutcome]],
    *,
    summary: str | None = None,
    cancel_siblings: Callable[[], bool] = lambda: False,
    paused: ProgramStatus | None = None,
    forked_from: str | None = None,
    carry: CallCarrier | None = None,
) -> ProgramStatus:
    """Run a program in the sandbox to its end; every call it makes goes to ``run_call``.

    Calls that pause together run concurrently; the program resumes with their
    outcomes. When the program fails (a call or a segment raises), the calls
    still running are cancelled if ``cancel_siblings()`` says so (``siblings``).

    A fork starts from the source's ``paused`` program instead of ``code.start``: ``code.fork``
    checks its snapshot against ``forked_from`` (the source's key) and signs it for ``start.run_key``.

    ``carry``: a call a kept-live program waits on alone goes there instead, with the program
    (``CallCarrier``); its answer may hold the program's next pause, and then no ``code.resume`` runs.
    """
    options = _segment_options(start.limits)
    calls: dict[int, asyncio.Task[CallOutcome]] = {}
    ahead: dict[int, ProgramStatus] = {}
    """The next pause a carried call's activity answered with, by the call's id."""

    def launch(new: list[PendingCall]) -> None:
        for call in new:
            if call.call_id not in calls:
                calls[call.call_id] = asyncio.ensure_future(run_call(call))

    async def carried(call: PendingCall, program: CarriedProgram) -> CallOutcome:
        assert carry is not None
        outcome, following = await carry(call, program)
        if following is not None:
            ahead[call.call_id] = following
        return outcome

    def resume_input(status: ProgramStatus, outcomes: list[CallOutcome]) -> ResumeProgramInput:
        return ResumeProgramInput(
            run_key=start.run_key,
            legacy_run_key=start.legacy_run_key,
            functions=start.functions,
            outcomes=outcomes,
            limits=start.limits,
            output=status.output,
            output_dropped=status.output_dropped,
            calls_made=status.calls_made,
            sandbox_seconds=status.sandbox_seconds,
            repl=start.repl,
            variable_names=start.variable_names,
        )

    def carries(status: ProgramStatus) -> PendingCall | None:
        """The call a kept-live program waits on alone, when it is new and its activity may resume it."""
        if carry is None or status.live is None or len(status.awaiting) != 1:
            return None
        waited = status.awaiting[0]
        call = next((c for c in status.calls if c.call_id == waited), None)
        if call is None or waited in calls or not carry.carries(call):
            return None
        return call if calls_carry_programs() else None

    # Kept live on the worker between calls, rebuilt by replay anywhere else (issue 39). A run recorded
    # before it replays its markers, which carry a snapshot and no ``live`` id: it takes the old branch below.
    start = start.model_copy(update={"keep_live": True})
    try:
        if paused is not None and forked_from is not None:
            # Re-bound before any call is made: a snapshot that is not the source's fails the fork here.
            fork = ForkProgramInput(source_key=forked_from, run_key=start.run_key, paused=paused)
            status = await _sandbox(CODE_FORK, fork, options, summary)
        else:
            status = await _sandbox(CODE_START, start, options, summary)
        log = status.replay
        while status.state == "pending":
            alone = carries(status) if log is not None else None
            if alone is not None:
                program = resume_input(status, []).model_copy(
                    update={
                        "live": status.live,
                        "replay_calls": status.replay_calls,
                        "replay_seconds": status.replay_seconds,
                    }
                )
                calls[alone.call_id] = asyncio.ensure_future(
                    carried(alone, CarriedProgram(call_id=alone.call_id, resume=program))
                )
            launch(status.calls)
            outcomes = list(await asyncio.gather(*(calls[i] for i in status.awaiting)))
            resume = resume_input(status, outcomes)
            following = ahead.pop(alone.call_id, None) if alone is not None else None
            if following is not None and following.fed == outcomes:
                # Resumed by the call's own activity, on the worker that held it: the pause cost one activity.
                assert log is not None
                if status.snapshot is not None:
                    log = log.model_copy(update={"base": status.snapshot, "batches": []})
                log = log.model_copy(update={"batches": [*log.batches, outcomes]})
                status = following
                continue
            if log is None:  # driven a snapshot per pause (a run recorded before programs were kept live)
                assert status.snapshot is not None
                resume.snapshot = status.snapshot
                status = await _sandbox(CODE_RESUME, resume, options, summary)
                continue
            if status.snapshot is not None:
                log = log.model_copy(update={"base": status.snapshot, "batches": []})
            resume.replay_calls, resume.replay_seconds = status.replay_calls, status.replay_seconds
            if status.live is not None:
                resume.live = status.live
                answer = await _sandbox(CODE_RESUME, resume, options, summary)
                if answer.needs_replay:
                    # Not live on the worker that took it (another worker, a restart, an eviction, a
                    # reset): the same resume with what rebuilds the program, from this run's record.
                    resume.live, resume.replay = None, log
                    answer = await _sandbox(CODE_RESUME, resume, options, summary)
            else:
                resume.replay = log
                answer = await _sandbox(CODE_RESUME, resume, options, summary)
            log = log.model_copy(update={"batches": [*log.batches, outcomes]})
            status = answer
        # Calls the program started but never awaited still ran; wait so every
        # side effect is recorded before the run reports.
        if status.state == "completed":
            launch(status.calls)
        if calls:
            await asyncio.gather(*calls.values())
    except GeneratorExit:
        raise  # closed by the garbage collector: no workflow call here (``cancel_siblings`` may ask a patch)
    except BaseException:
        await cancel_unfinished(calls.values(), cancel_siblings)
        raise
    return status


KEY_WAITS = (30, 60, 120, 300, 600, 900, 900, 900, 900, 900, 900)
"""Seconds to wait, in turn, before asking again for a snapshot signed with a key id the worker lacks
(about two hours in all): a key rollout ends within that, and meanwhile the workflow task can move to a
worker that has the key. Only the new ``SnapshotKeyUnknownError`` path takes them: histories without it
replay unchanged."""


async def _sandbox(name: str, arg: Any, options: dict[str, Any], summary: str | None) -> ProgramStatus:
    for wait in (*KEY_WAITS, None):
        try:
            status: ProgramStatus = await workflow.execute_local_activity(
                name, arg, result_type=ProgramStatus, summary=summary or name, **options
            )
            return status
        except (ActivityError, ApplicationError) as exc:
            # A local activity's failure can reach the workflow as the bare ApplicationError.
            error = from_failure(exc)
            if isinstance(error, SnapshotKeyUnknownError):
                if wait is None:
                    raise to_application_error(
                        SnapshotIntegrityError(
                            f"{error}; no worker holding that key took it in {sum(KEY_WAITS) // 60} minutes"
                        )
                    ) from exc
                workflow.logger.warning("%s; asking again in %d s", error, wait)
                await workflow.sleep(timedelta(seconds=wait))
                continue
            if isinstance(error, SnapshotIntegrityError):
                raise to_application_error(error) from exc
            raise
    raise AssertionError("unreachable")


__all__ = ["check_program", "drive_program", "program_keys"]
