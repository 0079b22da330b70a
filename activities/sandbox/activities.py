"""The code-mode activities: ``code.check``, ``code.start``, ``code.resume`` and a fork's ``code.fork``.

Each one holds a sandbox session only while the interpreter runs; a paused
program is a signed snapshot in the payload store, so any worker can resume
it, minutes or days later.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import datetime

from pydantic_monty import AsyncMontySession, MontyError
from temporalio import activity

from ...contracts.code.program import (
    CheckProgramInput,
    CheckProgramResult,
    ForkProgramInput,
    ProgramStatus,
    ReplMemory,
    ResumeProgramInput,
    SnapshotRef,
    StartProgramInput,
    VariableInfo,
)
from ...contracts.code.variables import probe_program
from ...contracts.errors import InvalidProgramResume, SnapshotIntegrityError, SnapshotKeyUnknownError
from ...contracts.names import CODE_CHECK, CODE_FORK, CODE_RESUME, CODE_START
from ...failures import to_application_error
from ...telemetry.metrics import CODE_PROGRAMS, CODE_SANDBOX_SECONDS
from .checker import check_program
from .driver import OutputSink, SegmentDriver, checkout_options
from .pool import SandboxPool
from .snapshots import SnapshotVault


class SandboxActivities:
    def __init__(self, pool: SandboxPool, vault: SnapshotVault) -> None:
        self.pool = pool
        self._vault = vault

    @activity.defn(name=CODE_CHECK)
    async def check(self, inp: CheckProgramInput) -> CheckProgramResult:
        async with _heartbeating():
            return CheckProgramResult(violations=await check_program(self.pool, inp.program, inp.stubs))

    @activity.defn(name=CODE_START)
    async def start(self, inp: StartProgramInput) -> ProgramStatus:
        driver = SegmentDriver(inp.functions, inp.limits, OutputSink(inp.limits.output_bytes), 0, 0.0)
        options = checkout_options(inp.limits, datetime.fromisoformat(inp.now), inp.seed)
        started = time.perf_counter()
        async with self.pool.session(**options) as session:
            if inp.repl is not None and inp.repl.snapshot is not None:
                await session.load_session(await self._load(inp.repl.key, inp.repl.snapshot))
            status, paused = await driver.start(session, inp.program)
            if paused is not None:
                status.snapshot = await self._vault.save(inp.run_key, paused.dump())
            await self._keep_repl(session, status, inp.repl, inp.variable_names)
        return _observed(status, started)

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
        blob = await self._load(inp.run_key, inp.snapshot, inp.legacy_run_key)
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
