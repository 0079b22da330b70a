"""``agentsteps chat`` and ``agentsteps session list|show|close``: sessions from a terminal.

``chat --spec FILE`` names a new session, which starts with its first message
(then its id is printed with how to resume it); ``chat --session ID`` resumes it
(days later, from any machine that reaches the server). A session that has
ended is refused with one line on stderr (exit 1): the terminal never reuses
its id (Python can: ``send_turn(..., reopen=True)``); ``chat --spec FILE``
starts a new one. While a
turn runs, its progress stream is followed: the answer's text as it streams
(a session started here has ``stream_tokens`` on), tool calls and violations
are shown as they happen, and a call that needs approval is asked inline
(``y``/``n``, then an optional note). Ctrl-C or ``/quit`` leaves the session
open; ``/close`` closes it. Lines are read from stdin, so the chat also runs
from a script.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import IO, TypeVar

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.service import RPCError, RPCStatusCode

from ..client.connection import connect
from ..client.dev_server import Stack, embedded_temporal
from ..client.session_stream import follow
from ..client.sessions import (
    NEW_FROM_A_TERMINAL,
    close_session,
    closed_message,
    continue_session,
    decide_approval,
    new_session_id,
    rewind_session,
    send_turn,
    session_handle,
    session_state,
    session_turns,
)
from ..client.spec_files import load_spec
from ..client.transcript import StreamItem
from ..contracts import AgentSpec
from ..contracts.approvals import PendingApproval
from ..contracts.config.settings import WorkerSettings
from ..contracts.errors import AgentStepsError, InvalidTurnError, SessionClosedError, SessionNotFoundError
from ..contracts.names import SESSION_WORKFLOW
from ..contracts.session import SessionConfig, TurnResult
from .failure_lines import describe
from .workers import WorkerMode, client_and_worker

T = TypeVar("T")

STREAMING = SessionConfig(stream_tokens=True)
HELP = "Type a message. /state shows the session, /close closes it, /quit (or Ctrl-C) leaves it open."


class Terminal:
    """Line input from a thread (the event loop keeps following the stream), output flushed at once."""

    def __init__(self, inp: IO[str], out: IO[str]) -> None:
        self.inp, self.out = inp, out

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def ask(self, prompt: str) -> str | None:
        self.out.write(prompt)
        self.out.flush()
        line = await asyncio.to_thread(self.inp.readline)
        return None if line == "" else line.rstrip("\n")


async def chat(
    settings: WorkerSettings,
    spec_path: str | None,
    session_id: str | None,
    *,
    worker: WorkerMode,
    inp: IO[str] = sys.stdin,
    out: IO[str] = sys.stdout,
) -> int:
    term = Terminal(inp, out)
    spec = load_spec(spec_path) if spec_path else None
    queue = _session_queue(session_id) if session_id else settings.task_queue
    async with client_and_worker(settings, worker, "chat", task_queue=queue) as local:
        client = local.client
        if session_id:
            sid = session_id
        else:
            assert spec is not None  # the command takes --spec or --session (one is required)
            sid = new_session_id(spec)
        opened = Opened(sid, started=bool(session_id))
        if session_id:
            state = await session_state(client, sid)
            term.say(f"resumed session {sid}: {state.turns} turns, {state.usage.total_tokens} tokens so far")
        else:
            term.say(f"new session {sid}: it starts with your first message")
        term.say(HELP)
        try:
            await _loop(client, local.task_queue, spec, opened, term)
        except (KeyboardInterrupt, asyncio.CancelledError):
            term.say("\n" + opened.leaving())
        except SessionGone as gone:
            term.say(f"! {gone}")
            return 1
    return 0


class Opened:
    """Whether the chat's session exists yet: a session ``chat --spec`` names starts with its first turn."""

    def __init__(self, sid: str, *, started: bool) -> None:
        self.sid, self.started = sid, started

    def leaving(self) -> str:
        if self.started:
            return f"left session {self.sid} open; resume with: agentsteps chat --session {self.sid}"
        return f"left before the first message: session {self.sid} was never started (nothing to resume)"


class SessionGone(Exception):
    """The session ended (closed, idle timeout, failed) while this chat was talking to it."""


def _session_queue(session_id: str) -> Callable[[Client, Stack], Awaitable[str]]:
    """The task queue of an open session; a closed or unknown id is refused on one line, before any worker starts."""

    async def find(client: Client, stack: Stack) -> str:
        return (await _describe_session(client, session_id, stack.address)).task_queue

    return find


async def _describe_session(client: Client, session_id: str, where: str) -> WorkflowExecutionDescription:
    try:
        info = await session_handle(client, session_id).describe()
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            raise SessionNotFound(
                f"no session {session_id!r} on {where} (`agentsteps session list` shows the open ones)"
            ) from None
        raise
    if info.status is not WorkflowExecutionStatus.RUNNING:
        raise SessionClosedError(await closed_message(client, session_id, NEW_FROM_A_TERMINAL))
    return info


async def _loop(client: Client, task_queue: str, spec: AgentSpec | None, opened: Opened, term: Terminal) -> None:
    sid = opened.sid
    while True:
        line = await term.ask("you> ")
        if line is None or line.strip() == "/quit":
            term.say(opened.leaving())
            return
        text = line.strip()
        if not text:
            continue
        if not opened.started and text.startswith("/"):
            term.say(f"session {sid} has not started yet: send a message first (or /quit to leave)")
            continue
        if text == "/close":
            state = await _gone_on_end(client, sid, close_session(client, sid, "closed from chat"))
            term.say(f"session {sid} closed after {state.turns} turns")
            return
        if text == "/state":
            state = await _gone_on_end(client, sid, session_state(client, sid))
            term.say(state.model_dump_json(indent=2))
            continue
        await _turn(client, task_queue, spec, sid, text, term)
        if not opened.started:
            opened.started = True
            term.say(f"session {sid} (resume with: agentsteps chat --session {sid})")


async def _gone_on_end(client: Client, sid: str, call: Awaitable[T]) -> T:
    """A session that has ended (or never existed) becomes one line for a terminal, not a traceback."""
    try:
        return await call
    except SessionClosedError:
        raise SessionGone(f"SessionClosedError: {await closed_message(client, sid, NEW_FROM_A_TERMINAL)}") from None
    except SessionNotFoundError as exc:
        raise SessionGone(f"SessionNotFoundError: {exc}") from None


async def _turn(client: Client, task_queue: str, spec: AgentSpec | None, sid: str, text: str, term: Terminal) -> None:
    stream = WorkflowStreamClient.create(client, sid)
    start = await _offset(stream)
    if spec is not None:
        # A session this chat starts streams its answers; one it resumes keeps the settings it started with.
        sent = send_turn(client, spec, text, session_id=sid, task_queue=task_queue, config=STREAMING)
    else:
        sent = continue_session(client, sid, text)
    turn = asyncio.ensure_future(_gone_on_end(client, sid, sent))
    view = Follower(client, sid, term)
    follower = asyncio.ensure_future(view.follow(stream, start))
    try:
        result: TurnResult = await turn
    except (AgentStepsError, WorkflowUpdateFailedError) as exc:
        follower.cancel()
        view.end_line()
        term.say(f"! the turn failed: {describe(exc)}")
        return
    except SessionGone:
        follower.cancel()
        view.end_line()
        raise
    try:  # the stream's last events (the answer's last text) may still be on their way
        await asyncio.wait_for(follower, timeout=2)
    except (asyncio.TimeoutError, RPCError):
        follower.cancel()
    view.finish(_answer(result))


async def _offset(stream: WorkflowStreamClient) -> int:
    try:
        return await stream.get_offset()
    except Exception:  # a session that does not exist yet starts at 0
        return 0


class Follower:
    """Shows one turn's progress stream: the answer's text as it streams, tool calls, approvals (asked inline)."""

    def __init__(self, client: Client, sid: str, term: Terminal) -> None:
        self.client, self.sid, self.term = client, sid, term
        self.line = ""
        """The answer text on the current ``agent>`` line, streamed so far."""
        self.open = False

    async def follow(self, stream: WorkflowStreamClient, start: int) -> None:
        """Until the turn's end, through this process's one feed of the session (no Update: a chat never takes
        what turns and approvals need); a new session's first turn may start before its workflow exists."""
        async with aclosing(follow(self.client, self.sid, after=start - 1)) as items:
            async for item in items:
                if item.kind == "turn_ended":
                    return
                await self.show(item)

    def end_line(self) -> None:
        if self.open:
            self.term.write("\n")
            self.open = False

    def finish(self, answer: str) -> None:
        """The completed answer is what counts: shown again unless the streamed line already says it."""
        streamed, self.line = self.line, ""
        if self.open and streamed.strip() == answer.strip():
            self.end_line()
            return
        self.end_line()
        self.term.say(f"agent> {answer}")

    async def show(self, item: StreamItem) -> None:
        """One folded item: each piece of the answer once (a retried call's replayed text never shows twice)."""
        if item.kind == "text" or item.corrected:
            if item.fallback:
                self.end_line()
                self.term.say(f"  (the answer continues on the fallback model {item.model})")
            if self.open and item.at < len(self.line):
                self.end_line()
                self.term.say("  (the model call was retried and answered otherwise; its answer:)")
                self.term.write("agent> " + self.line[: item.at])
                self.open, self.line = True, self.line[: item.at]
            if not self.open:
                self.term.write("agent> ")
                self.open, self.line = True, ""
            self.line += item.text
            self.term.write(item.text)
            return
        event = item.event
        if event is None:
            return
        if event.kind == "tool_call":
            self.end_line()
            self.term.say(f"  · {event.tool}({event.detail})")
        elif event.kind == "step" and event.detail == "assistant":
            self.end_line()
            self.term.say(f"  ! step {event.step}: the answer broke a contract; re-prompting")
        elif event.kind == "approval_requested" and event.approval is not None:
            self.end_line()
            await self.ask_approval(event.approval)

    async def ask_approval(self, pending: PendingApproval) -> None:
        term = self.term
        answer = await term.ask(f"  ? {pending.reason}: {pending.tool}({pending.arguments}). Approve? [y/n] ")
        note = await term.ask("    note (optional): ") or ""
        try:
            record = await decide_approval(
                self.client,
                self.sid,
                pending.approval_id,
                approve=(answer or "").strip().lower().startswith("y"),
                note=note,
                approver="chat",
            )
            term.say(f"    {record.outcome}")
        except (AgentStepsError, WorkflowUpdateFailedError) as exc:
            term.say(f"    not recorded: {describe(exc)}")


def _answer(result: TurnResult) -> str:
    output = result.output
    return output if isinstance(output, str) else result.model_dump_json(include={"output"})


class SessionNotFound(Exception):
    """No workflow has that session id."""


def _any_session_queue(session_id: str) -> Callable[[Client, Stack], Awaitable[str]]:
    async def find(client: Client, stack: Stack) -> str:
        try:
            return (await session_handle(client, session_id).describe()).task_queue
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                raise SessionNotFound(f"no session {session_id!r} on {stack.address}") from None
            raise

    return find


async def session_command(
    settings: WorkerSettings,
    action: str,
    session_id: str | None,
    reason: str,
    out: IO[str],
    *,
    worker: WorkerMode = "auto",
    to_turn: int | None = None,
) -> int:
    """``session list|show|close|rewind``; an unknown or closed id is one line on stderr and exit status 1."""
    try:
        return await _session_command(settings, action, session_id, reason, out, worker, to_turn)
    except SessionNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
    except (SessionClosedError, SessionNotFoundError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 1


async def _session_command(
    settings: WorkerSettings,
    action: str,
    session_id: str | None,
    reason: str,
    out: IO[str],
    worker: WorkerMode,
    to_turn: int | None,
) -> int:
    if action == "list":
        async with embedded_temporal(settings) as stack:
            client = await connect(settings, stack.address)
            query = f"WorkflowType = '{SESSION_WORKFLOW}' AND ExecutionStatus = 'Running'"
            async for wf in client.list_workflows(query):
                print(f"{wf.id}\tstarted {wf.start_time:%Y-%m-%d %H:%M}", file=out)
        return 0
    assert session_id is not None
    if action == "show":
        queue = _any_session_queue(session_id)  # a closed session can still be shown, from its history
    else:
        queue = _session_queue(session_id)
    # Queries and updates need a worker on the session's queue: the one there, or this process's.
    async with client_and_worker(settings, worker, "session", task_queue=queue) as local:
        client = local.client
        if action == "show":
            state = await session_state(client, session_id)
            print(state.model_dump_json(indent=2), file=out)
            for t in await session_turns(client, session_id):
                print(f"#{t.turn} {t.status:<22} {t.input!r} -> {t.output!r}", file=out)
            return 0
        if action == "rewind":
            if to_turn is None:
                print("error: session rewind needs --to-turn N", file=sys.stderr)
                return 2
            try:
                state = await rewind_session(client, session_id, to_turn)
            except InvalidTurnError as exc:
                print(f"error: InvalidTurnError: {exc}", file=sys.stderr)
                return 2
            last = state.rewinds[-1]
            undone = ", ".join(f"#{t.turn}" for t in last.undone) or "none"
            print(
                f"session {session_id} rewound to turn {to_turn}; undone turns: {undone} (kept in its state); "
                f"{len(last.effects)} side effects of theirs stay done and will not be repeated",
                file=out,
            )
            return 0
        try:
            state = await close_session(client, session_id, reason)
        except SessionClosedError:
            raise SessionClosedError(await closed_message(client, session_id, NEW_FROM_A_TERMINAL)) from None
        print(f"session {session_id} closed after {state.turns} turns", file=out)
        return 0


__all__ = ["chat", "session_command"]
