"""The code-mode activities: ``code.check``, ``code.start``, ``code.resume`` and a fork's ``code.fork``.

Each one holds a sandbox session only while the interpreter runs; a paused
program is a signed snapshot in the payload store, so any worker can resume
it, minutes or days later.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

from pydantic_monty import AsyncMontySession, MontyError
from temporalio import activity

from ...contracts.code.carried import CarriedProgram, program_outcome
from ...contracts.code.program import (
    CheckProgramInput,
    CheckProgramResult,
    ForkProgramInput,
    ProgramFunction,
    ProgramStatus,
    ReplayLog,
    ReplMemory,
    ResumeProgramInput,
    SnapshotRef,
    StartProgramInput,
    VariableInfo,
)
from ...contracts.code.variables import probe_program
from ...contracts.errors import InvalidProgramResume, SnapshotIntegrityError, SnapshotKeyUnknownError
from ...contracts.llm.tools import ToolCallResult
from ...contracts.names import CODE_CHECK, CODE_FORK, CODE_RESUME, CODE_START
from ...failures import to_application_error
from ...telemetry.metrics import CODE_PROGRAMS, CODE_RESUMES, CODE_SANDBOX_SECONDS
from .checker import check_program
from .driver import OutputSink, ReplayDiverged, SegmentDriver, checkout_options
from .live import LiveProgram
from .pool import SandboxPool
from .snapshots import SnapshotVault

REPLAY_CALLS_BOUND = 200
"""Pauses a replay may go through: past it the paused program is stored as a snapshot and later replays
start there. About 0.3 ms of interpreter round trip per pause, so a replay stays under ~60 ms."""
REPLAY_SECONDS_BOUND = 1.0
"""Interpreter seconds (as recorded the first time) a replay may recompute before a snapshot is stored."""


class SandboxActivities:
    def __init__(self, pool: SandboxPool, vault: SnapshotVault) -> None:
        self.pool = pool
        self._vault = vault
        self.replay_calls_bound = REPLAY_CALLS_BOUND
        self.replay_seconds_bound = REPLAY_SECONDS_BOUND

    @activity.defn(name=CODE_CHECK)
    async def check(self, inp: CheckProgramInput) -> CheckProgramResult:
        async with _heartbeating():
            return CheckProgramResult(violations=await check_program(self.pool, inp.program, inp.stubs))

    @activity.defn(name=CODE_START)
    async def start(self, inp: StartProgramInput) -> ProgramStatus:
        sink = OutputSink(inp.limits.output_bytes)
        driver = SegmentDriver(inp.functions, inp.limits, sink, 0, 0.0)
        options = checkout_options(inp.limits, datetime.fromisoformat(inp.now), inp.seed, whole_program=inp.keep_live)
        started = time.perf_counter()
        held = await self.pool.open(**options)
        kept = False
        try:
            session = held.session
            if inp.repl is not None and inp.repl.snapshot is not None:
                await session.load_session(await self._load(inp.repl.key, inp.repl.snapshot))
            status, paused = await driver.start(session, inp.program)
            if paused is not None and inp.keep_live:
                status.replay = ReplayLog(program=inp.program, now=inp.now, seed=inp.seed, repl=inp.repl)
                status.replay_seconds = status.sandbox_seconds
                held.detach()
                kept = await self._keep_live(inp.run_key, status, session, paused, sink, held.close, inp.functions)
            elif paused is not None:
                status.snapshot = await self._vault.save(inp.run_key, paused.dump())
            await self._keep_repl(session, status, inp.repl, inp.variable_names)
        finally:
            if not kept:
                await held.close()
        return _observed(status, started)

    async def _keep_live(
        self,
        run_key: str,
        status: ProgramStatus,
        session: AsyncMontySession,
        paused: Any,
        sink: OutputSink,
        close: Callable[[], Awaitable[None]],
        functions: list[ProgramFunction],
    ) -> bool:
        """Keep a paused program live here; store a snapshot only before a long wait (a call that waits for
        an approval) and where a replay would cost more than its bound (``REPLAY_CALLS_BOUND`` pauses or
        ``REPLAY_SECONDS_BOUND`` of interpreter time since the last one): no store write per call."""
        long_waits = {f.python_name for f in functions if f.long_wait}
        waits_long = any(c.function in long_waits for c in status.calls)
        if (
            waits_long
            or status.replay_calls >= self.replay_calls_bound
            or status.replay_seconds >= self.replay_seconds_bound
        ):
            status.snapshot = await self._vault.save(run_key, paused.dump())
            status.replay_calls, status.replay_seconds = 0, 0.0
        if waits_long:
            return False  # waiting on a person: the snapshot alone holds it, no process is kept for days
        status.live = uuid.uuid4().hex
        await self.pool.live.keep(run_key, status.live, LiveProgram(session, paused, sink, close))
        return True

    async def load_signed(self, key: str, ref: SnapshotRef) -> bytes:
        """A snapshot signed for ``key`` (typed failure otherwise), for another activity (``session.fork``)."""
        return await self._load(key, ref)

    async def save_signed(self, key: str, data: bytes) -> SnapshotRef:
        return await self._vault.save(key, data)

    async def _load(self, key: str, ref: SnapshotRef, legacy_key: str | None = None) -> bytes:
        try:
            return await self._vault.load(key, ref, legacy_key)
        except SnapshotKeyUnknownError as exc:
            CODE_PROGRAMS.labels(outcome="key_unknown").inc()
            activity.logger.warning("%s", exc)
            raise to_application_error(exc) from None
        except SnapshotIntegrityError as exc:
            CODE_PROGRAMS.labels(outcome="tampered").inc()
            raise to_application_error(exc) from None

    async def _keep_repl(
        self, session: AsyncMontySession, status: ProgramStatus, repl: ReplMemory | None, names: list[str]
    ) -> None:
        """Sessions: dump the REPL of a completed program (signed for the session) and say what it holds."""
        if repl is None or status.state != "completed":
            return
        snapshot = await self._vault.save(repl.key, await session.dump())
        # After the dump, so the probe's helper never becomes part of the kept state.
        try:
            found = await session.feed_run(probe_program(names)) if names else {}
        except MontyError:
            found = {}
        variables = [_variable(n, found[n]) for n in names if n in found]
        status.repl = ReplMemory(key=repl.key, snapshot=snapshot, variables=variables)

    @activity.defn(name=CODE_RESUME)
    async def resume(self, inp: ResumeProgramInput) -> ProgramStatus:
        """Resume a paused program: live on this worker if it is here, else rebuilt by replay (when the
        workflow sent the ``ReplayLog``; without one the answer is ``needs_replay``), else, for runs
        driven a snapshot per pause, from its snapshot."""
        if inp.live is None and inp.replay is None:
            if inp.snapshot is None:
                raise to_application_error(
                    InvalidProgramResume("a resume names a live program, a replay or a snapshot")
                )
            CODE_RESUMES.labels(source="snapshot").inc()
            return await self._resume_snapshot(inp, inp.snapshot)
        started = time.perf_counter()
        program = self.pool.live.take(inp.run_key, inp.live) if inp.live is not None else None
        if program is None and inp.replay is None:
            CODE_RESUMES.labels(source="not_live").inc()
            return ProgramStatus(state="pending", needs_replay=True)
        if program is not None:
            CODE_RESUMES.labels(source="live").inc()
            program.sink.text, program.sink.dropped = inp.output, inp.output_dropped
        else:
            assert inp.replay is not None
            CODE_RESUMES.labels(source="replay").inc()
            program = await self._replayed(inp, inp.replay)
        return await self._continue(inp, program, started)

    async def resume_carried(self, carried: CarriedProgram, result: ToolCallResult) -> ProgramStatus | None:
        """For the ``tools.call`` activity of the call a program waits on alone: that program resumed with
        the call's outcome, when it is live on this worker; None when it is not (the workflow then resumes
        it with ``code.resume``, which rebuilds it by replay). The segment has no side effect: only the
        tool's, already done, and it is the same segment ``code.resume`` would run."""
        inp = carried.resume
        if inp.live is None:
            return None
        started = time.perf_counter()
        program = self.pool.live.take(inp.run_key, inp.live)
        if program is None:
            return None
        CODE_RESUMES.labels(source="carried").inc()
        program.sink.text, program.sink.dropped = inp.output, inp.output_dropped
        inp = inp.model_copy(update={"outcomes": [program_outcome(carried.call_id, result)]})
        return await self._continue(inp, program, started)

    async def _continue(self, inp: ResumeProgramInput, program: LiveProgram, started: float) -> ProgramStatus:
        driver = SegmentDriver(inp.functions, inp.limits, program.sink, inp.calls_made, inp.sandbox_seconds)
        kept = False
        try:
            try:
                status, paused = await driver.resume_live(program.paused, inp.outcomes, program.session)
            except ValueError as exc:
                raise to_application_error(InvalidProgramResume(str(exc))) from None
            status.fed = inp.outcomes
            status.replay_calls = inp.replay_calls + 1
            status.replay_seconds = inp.replay_seconds + max(0.0, status.sandbox_seconds - inp.sandbox_seconds)
            if paused is not None:
                kept = await self._keep_live(
                    inp.run_key, status, program.session, paused, program.sink, program.close, inp.functions
                )
            await self._keep_repl(program.session, status, inp.repl, inp.variable_names)
        finally:
            if not kept:
                await program.close()
        return _observed(status, started)

    async def _replayed(self, inp: ResumeProgramInput, log: ReplayLog) -> LiveProgram:
        """The program rebuilt on this worker by deterministic replay, paused where ``inp`` resumes it."""
        base = await self._load(inp.run_key, log.base, inp.legacy_run_key) if log.base is not None else None
        # No time limit while it re-runs the recorded segments (they passed theirs the first time); the
        # segment after them is live again and the driver bounds it (``driver.py``).
        options = checkout_options(inp.limits, datetime.fromisoformat(log.now), log.seed, whole_program=True)
        held = await self.pool.open(**options)
        sink = OutputSink(inp.limits.output_bytes, inp.output, inp.output_dropped)
        driver = SegmentDriver(inp.functions, inp.limits, sink, 0, 0.0)
        try:
            if base is None and log.repl is not None and log.repl.snapshot is not None:
                await held.session.load_session(await self._load(log.repl.key, log.repl.snapshot))
            paused = await driver.replay(held.session, log.program, base, log.batches)
        except ReplayDiverged as exc:
            await held.close()
            CODE_PROGRAMS.labels(outcome="replay_diverged").inc()
            raise to_application_error(InvalidProgramResume(str(exc))) from None
        except BaseException:
            await held.close()
            raise
        held.detach()
        return LiveProgram(held.session, paused, sink, held.close)

    async def _resume_snapshot(self, inp: ResumeProgramInput, snapshot: SnapshotRef) -> ProgramStatus:
        """A program paused as a snapshot per pause (runs started before programs were kept live)."""
        blob = await self._load(inp.run_key, snapshot, inp.legacy_run_key)
        sink = OutputSink(inp.limits.output_bytes, inp.output, inp.output_dropped)
        driver = SegmentDriver(inp.functions, inp.limits, sink, inp.calls_made, inp.sandbox_seconds)
        started = time.perf_counter()
        # The dump carries the limits and OS policy it was started with.
        async with self.pool.session() as session:
            try:
                status, paused = await driver.restore(session, blob, inp.outcomes)
            except ValueError as exc:
                raise to_application_error(InvalidProgramResume(str(exc))) from None
            if paused is not None:
                status.snapshot = await self._vault.save(inp.run_key, paused.dump())
            await self._keep_repl(session, status, inp.repl, inp.variable_names)
        return _observed(status, started)

    @activity.defn(name=CODE_FORK)
    async def fork(self, inp: ForkProgramInput) -> ProgramStatus:
        """A source's paused program for a fork: its snapshot checked against the source's key (typed
        ``SnapshotIntegrityError`` when it is not that program's, was altered or was collected), then
        signed for the fork. Content-addressed, so the bytes are stored once; only the binding is new."""
        if inp.paused.state == "pending" and inp.paused.snapshot is None and inp.paused.replay is not None:
            # Kept live in the source: the fork replays it; only a stored base needs binding to the fork.
            log = inp.paused.replay
            if log.base is not None:
                blob = await self._load(inp.source_key, log.base)
                log = log.model_copy(update={"base": await self._vault.save(inp.run_key, blob)})
            return inp.paused.model_copy(update={"replay": log, "live": None})
        if inp.paused.state != "pending" or inp.paused.snapshot is None:
            raise to_application_error(InvalidProgramResume("a fork starts from a paused program (with a snapshot)"))
        blob = await self._load(inp.source_key, inp.paused.snapshot)
        return inp.paused.model_copy(update={"snapshot": await self._vault.save(inp.run_key, blob)})


@contextlib.asynccontextmanager
async def _heartbeating(every: float = 1.0) -> AsyncIterator[None]:
    """Heartbeat while a check runs, so a killed worker's check is retried
    elsewhere after the heartbeat timeout, not after the whole activity timeout.
    (``code.start``/``code.resume`` run as local activities, which have no
    heartbeats: the workflow task timeout covers them.)"""
    if not activity.in_activity():
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


def _observed(status: ProgramStatus, started: float) -> ProgramStatus:
    CODE_SANDBOX_SECONDS.observe(time.perf_counter() - started)
    if status.state != "pending":
        CODE_PROGRAMS.labels(outcome=status.error.kind if status.error else "completed").inc()
    return status


def _variable(name: str, probed: object) -> VariableInfo:
    """The probe's ``[type name, len() or None]`` for one variable (never its value)."""
    kind, size = probed if isinstance(probed, list) and len(probed) == 2 else (probed, None)
    return VariableInfo(name=name, type=str(kind), size=size if isinstance(size, int) else None)
