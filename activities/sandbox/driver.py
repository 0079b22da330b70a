"""Drive one program segment: from a start or a restored snapshot to the next pause.

A pause is the moment every sandbox task waits on external calls (Monty's
future snapshot). Each external call seen on the way is answered with a
future, so calls gathered with ``asyncio.gather`` surface together and the
workflow can run them concurrently. OS calls (files, environment, imports of
host modules) are refused inside the program; the clock and ``random`` never
reach the host because the session's OS policy freezes and seeds them.

Limits are deterministic on replay (issue 39). Monty counts memory, recursion
depth and suspensions itself, the same way every time, so those are its
session limits. Wall-clock time is not: a loaded machine replays a segment
slower than it first ran. So no session carries a time limit (a dump keeps the
limits of the session it was taken from, and a replay from it would inherit
them); the driver bounds each *live* segment itself (``segment_seconds``, the
interpreter's process killed when it passes), and a replay, which only re-runs
segments that paused the first time, is bounded by nothing but the counted
limits. A segment whose limit fired the first time is never re-run: its failure
is in the run's history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import time
from datetime import datetime
from typing import Any, Literal

from pydantic_monty import (
    AsyncFunctionSnapshot,
    AsyncFutureSnapshot,
    AsyncMontySession,
    AsyncNameLookupSnapshot,
    ExcType,
    ExternalExceptionData,
    ExternalReturnValue,
    MontyComplete,
    MontyCrashedError,
    MontyError,
    MontyRuntimeError,
    MontySyntaxError,
    MontyTypingError,
)

from ...contracts.code.program import (
    CallOutcome,
    PendingCall,
    ProgramError,
    ProgramErrorKind,
    ProgramFunction,
    ProgramLimits,
    ProgramStatus,
)

_MAX_ERROR_CHARS = 2000
MAX_VALUE_DEPTH = 64
"""Nesting allowed in a value leaving the sandbox. Deeper values would pass
Monty (it cuts at 1,000 levels with a silent ``'<deeply nested>'``) but not
pydantic's JSON (about 200 levels), failing the activity or, worse, the
workflow task that decodes its result."""
_OS_REFUSAL = "programs have no access to files, the environment or host modules"


class _Failed(Exception):
    def __init__(self, kind: ProgramErrorKind, message: str) -> None:
        self.error = ProgramError(kind=kind, message=message[:_MAX_ERROR_CHARS])


class OutputSink:
    """Keeps the first ``cap`` characters of printed output and counts the rest."""

    def __init__(self, cap: int, text: str = "", dropped: int = 0) -> None:
        self.cap = cap
        self.text = text
        self.dropped = dropped
        self.muted = False
        """While a replay re-runs segments: their output was kept the first time."""

    def __call__(self, stream: str, chunk: str) -> None:
        if self.muted:
            return
        room = self.cap - len(self.text)
        if room > 0:
            self.text += chunk[:room]
        self.dropped += max(0, len(chunk) - max(room, 0))


def checkout_options(
    limits: ProgramLimits, now: datetime, seed: int, *, whole_program: bool = False, replay: bool = False
) -> dict[str, Any]:
    """``whole_program``: one session runs every segment (kept live, or replayed from the start), so the
    suspension budget counts the whole program, not one segment. Only counted limits: the time limit is
    the driver's, on live segments alone (see the module), so a session replayed on a loaded machine, and
    any dump taken from a session, carries none. ``replay`` is kept for callers; the options are the same."""
    del replay
    # Pauses: each call, each future resolution and each name lookup.
    suspensions = (4 * limits.max_tool_calls + 1024) if whole_program else (2 * limits.max_tool_calls + 16)
    return {
        "limits": {
            "max_memory": limits.memory_bytes,
            "max_recursion_depth": limits.recursion_depth,
            "max_suspensions": suspensions,
        },
        "os_policy": {"datetime": now, "random_start": {"seed": seed}, "sleep": "zero"},
    }


def external_lookup(functions: list[ProgramFunction]) -> dict[str, Any]:
    # Placeholders: every call pauses the program and is answered by the
    # workflow, so these are never invoked; they only declare the names.
    def _never_called(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("tool calls are answered by the workflow")

    return {f.python_name: _never_called for f in functions}


class SegmentDriver:
    """Runs the interpreter until it pauses, completes or fails, and says which."""

    def __init__(
        self,
        functions: list[ProgramFunction],
        limits: ProgramLimits,
        sink: OutputSink,
        calls_made: int,
        sandbox_seconds: float,
    ) -> None:
        self._functions = {f.python_name: f for f in functions}
        self._limits = limits
        self.sink = sink
        self._calls_made = calls_made
        self._sandbox_seconds = sandbox_seconds
        self._calls: list[PendingCall] = []

    async def start(self, session: AsyncMontySession, program: str) -> tuple[ProgramStatus, Any]:
        return await self._timed(
            session,
            lambda: session.feed_start(
                program, external_lookup=external_lookup(list(self._functions.values())), print_callback=self.sink
            ),
        )

    async def restore(
        self, session: AsyncMontySession, blob: bytes, outcomes: list[CallOutcome]
    ) -> tuple[ProgramStatus, Any]:
        restored: list[Any] = []

        async def load() -> None:  # before the segment's deadline: loading is not the program's time
            restored.append(
                await session.load_snapshot(
                    blob, print_callback=self.sink, external_lookup=external_lookup(list(self._functions.values()))
                )
            )

        async def resumed() -> Any:
            snapshot = restored[0]
            if not isinstance(snapshot, AsyncFutureSnapshot):
                raise _Failed("crashed", f"restored program is not paused on calls ({type(snapshot).__name__})")
            return await snapshot.resume(_answers(snapshot, outcomes))

        return await self._timed(session, resumed, load)

    async def resume_live(
        self, paused: AsyncFutureSnapshot, outcomes: list[CallOutcome], session: AsyncMontySession | None = None
    ) -> tuple[ProgramStatus, Any]:
        """A program kept live on this worker (or just rebuilt by replay), answered with its awaited calls'
        outcomes: a live segment, under the time limit. ``session``: the interpreter to kill if it passes."""

        async def resumed() -> Any:
            return await paused.resume(_answers(paused, outcomes))

        return await self._timed(session, resumed)

    async def replay(
        self,
        session: AsyncMontySession,
        program: str,
        base: bytes | None,
        batches: list[list[CallOutcome]],
    ) -> AsyncFutureSnapshot:
        """Rebuild a paused program: from ``base`` (a stored snapshot) or its start, each pause answered with
        the next recorded batch. Its output and calls were recorded the first time, so neither is kept
        again; a pause that does not wait on the recorded calls is ``ReplayDiverged``."""
        self.sink.muted = True
        lookup = external_lookup(list(self._functions.values()))
        try:
            if base is not None:
                snapshot = await session.load_snapshot(base, print_callback=self.sink, external_lookup=lookup)
            else:
                snapshot = await session.feed_start(program, external_lookup=lookup, print_callback=self.sink)
            for number, batch in enumerate(batches):
                snapshot = await self._to_pause(snapshot, number)
                snapshot = await snapshot.resume(_answers(snapshot, batch, number))
            paused = await self._to_pause(snapshot, len(batches))
        except MontyError as exc:
            raise ReplayDiverged(f"the program failed on replay where it paused the first time: {exc}") from None
        finally:
            self.sink.muted = False
        self._calls = []
        return paused

    async def _to_pause(self, snapshot: Any, number: int) -> AsyncFutureSnapshot:
        while not isinstance(snapshot, AsyncFutureSnapshot):
            if isinstance(snapshot, AsyncNameLookupSnapshot):
                snapshot = await snapshot.resume_auto()
            elif isinstance(snapshot, AsyncFunctionSnapshot):
                snapshot = await self._on_call(snapshot)
            else:
                raise ReplayDiverged(
                    f"the program ended on replay before its pause {number} ({type(snapshot).__name__})"
                )
        return snapshot

    async def _timed(
        self, session: AsyncMontySession | None, first_step: Any, load: Any = None
    ) -> tuple[ProgramStatus, Any]:
        started = time.perf_counter()
        try:
            if self._sandbox_seconds >= self._limits.total_seconds:
                raise _Failed("timeout", f"program used its {self._limits.total_seconds}s of interpreter time")
            if load is not None:
                await load()
            status, paused = await self._live_segment(session, first_step)
        except _Failed as failed:
            status, paused = self._status("failed", error=failed.error), None
        except MontyError as exc:
            status, paused = self._status("failed", error=_program_error(exc)), None
        status.sandbox_seconds = self._sandbox_seconds + (time.perf_counter() - started)
        if status.state == "pending" and status.sandbox_seconds > self._limits.total_seconds:
            status, paused = (
                self._status(
                    "failed",
                    error=ProgramError(
                        kind="timeout", message=f"program used its {self._limits.total_seconds}s of interpreter time"
                    ),
                ),
                None,
            )
            status.sandbox_seconds = self._sandbox_seconds + (time.perf_counter() - started)
        return status, paused

    async def _live_segment(self, session: AsyncMontySession | None, first_step: Any) -> tuple[ProgramStatus, Any]:
        """One live segment, from its first step to the next pause or the end, within ``segment_seconds``
        of wall clock; past it the interpreter's process is killed (a tight loop holds a core until it is)."""
        deadline = asyncio.timeout(self._limits.segment_seconds)
        try:
            async with deadline:
                return await self._drive(await first_step())
        except TimeoutError:
            if not deadline.expired():
                raise
        _kill(session)
        raise _Failed(
            "timeout",
            f"TimeoutError: the program ran longer than {self._limits.segment_seconds}s between two pauses",
        )

    async def _drive(self, snapshot: Any) -> tuple[ProgramStatus, Any]:
        while True:
            if isinstance(snapshot, MontyComplete):
                return self._status("completed", value=_to_json(snapshot.output)), None
            if isinstance(snapshot, AsyncFutureSnapshot):
                return self._status("pending", awaiting=sorted(snapshot.pending_call_ids)), snapshot
            if isinstance(snapshot, AsyncNameLookupSnapshot):
                snapshot = await snapshot.resume_auto()
            elif isinstance(snapshot, AsyncFunctionSnapshot):
                snapshot = await self._on_call(snapshot)
            else:
                raise _Failed("crashed", f"unexpected interpreter state {type(snapshot).__name__}")

    async def _on_call(self, snapshot: AsyncFunctionSnapshot) -> Any:
        if snapshot.is_os_function:
            exc_type: ExcType = "ModuleNotFoundError" if snapshot.function_name == "import" else "PermissionError"
            return await snapshot.resume({"exc_type": exc_type, "message": f"{snapshot.function_name}: {_OS_REFUSAL}"})
        function = self._functions.get(snapshot.function_name)
        if function is None:
            return await snapshot.resume(
                {"exc_type": "NameError", "message": f"{snapshot.function_name} is not a tool"}
            )
        self._calls_made = max(self._calls_made, snapshot.call_id + 1)
        if self._calls_made > self._limits.max_tool_calls:
            raise _Failed("tool_call_limit", f"program made more than {self._limits.max_tool_calls} tool calls")
        try:
            arguments = _name_arguments(function, snapshot.args, snapshot.kwargs)
        except TypeError as exc:
            return await snapshot.resume({"exc_type": "TypeError", "message": str(exc)})
        self._calls.append(PendingCall(call_id=snapshot.call_id, function=function.python_name, arguments=arguments))
        return await snapshot.resume({"future": ...})

    def _status(self, state: Literal["pending", "completed", "failed"], **fields: Any) -> ProgramStatus:
        return ProgramStatus(
            state=state,
            calls=self._calls,
            output=self.sink.text,
            output_dropped=self.sink.dropped,
            calls_made=self._calls_made,
            **fields,
        )


_RUNTIME_ERROR_KINDS: tuple[tuple[str, ProgramErrorKind], ...] = (
    ("TimeoutError", "timeout"),
    ("MemoryError", "memory"),
    ("RecursionError", "recursion"),
)
"""A program's uncaught exception, by the head of its message, when it is one of the sandbox's limits."""


def _kill(session: AsyncMontySession | None) -> None:
    """Stop a segment past its time limit at once: its interpreter's process (the session is discarded)."""
    pid = getattr(session, "worker_pid", None) if session is not None else None
    if isinstance(pid, int) and pid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class ReplayDiverged(Exception):
    """A replayed program did not pause where its history says it did: not the same program run, so the
    recorded outcomes cannot answer it (a Monty upgrade that changed behaviour, or a tampered input)."""


def _answers(snapshot: AsyncFutureSnapshot, outcomes: list[CallOutcome], number: int | None = None) -> dict[int, Any]:
    by_id = {o.call_id: o for o in outcomes}
    missing = [cid for cid in snapshot.pending_call_ids if cid not in by_id]
    if missing:
        if number is not None:
            raise ReplayDiverged(f"on replay the program's pause {number} awaits calls {missing}, which it did not")
        raise ValueError(f"no outcome for awaited call ids {missing}")
    return {cid: _answer(by_id[cid]) for cid in snapshot.pending_call_ids}


def _answer(outcome: CallOutcome) -> ExternalReturnValue | ExternalExceptionData:
    if outcome.error is not None:
        return {"exc_type": "RuntimeError", "message": outcome.error}
    return {"return_value": outcome.value}


def _name_arguments(function: ProgramFunction, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    if len(args) > len(function.params):
        raise TypeError(f"{function.python_name}() takes {len(function.params)} arguments, {len(args)} given")
    named = dict(zip(function.params, args))
    for key, value in kwargs.items():
        if key in named:
            raise TypeError(f"{function.python_name}() got multiple values for argument {key!r}")
        named[key] = value
    named = {k: v for k, v in named.items() if v is not None or k in function.required}
    return json.dumps(_to_json(named), ensure_ascii=False)


def _to_json(value: Any, path: str = "$", depth: int = 0) -> Any:
    """Only JSON crosses out of the sandbox; anything else is the program's error."""
    if depth > MAX_VALUE_DEPTH:
        raise _Failed("not_serializable", f"value at {path[:200]} is nested more than {MAX_VALUE_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Failed("not_serializable", f"value at {path} is {value}, which JSON cannot represent")
        return value
    if isinstance(value, (list, tuple)):
        return [_to_json(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _Failed("not_serializable", f"dict key {k!r} at {path} is not a string")
            out[k] = _to_json(v, f"{path}.{k}", depth + 1)
        return out
    raise _Failed(
        "not_serializable",
        f"value at {path} is a {type(value).__name__}; return only dicts, lists, strings, numbers, booleans and None",
    )


def _program_error(exc: MontyError) -> ProgramError:
    if isinstance(exc, MontySyntaxError):
        return ProgramError(kind="syntax", message=exc.display("type-msg")[:_MAX_ERROR_CHARS])
    if isinstance(exc, MontyTypingError):
        return ProgramError(kind="type", message=exc.display()[:_MAX_ERROR_CHARS])
    if isinstance(exc, MontyCrashedError):
        kind: ProgramErrorKind = "timeout" if exc.timed_out else "crashed"
        return ProgramError(kind=kind, message=str(exc)[:_MAX_ERROR_CHARS])
    if isinstance(exc, MontyRuntimeError):
        head = exc.display("type-msg")
        kind = "exception"
        for prefix, mapped in _RUNTIME_ERROR_KINDS:
            if head.startswith(prefix):
                kind = mapped
        text = exc.display("traceback")
        return ProgramError(kind=kind, message=text[-_MAX_ERROR_CHARS:])
    return ProgramError(kind="crashed", message=str(exc)[:_MAX_ERROR_CHARS])
