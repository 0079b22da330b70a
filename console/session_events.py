"""``GET /api/sessions/{id}/events``: a session's progress as server-sent events, for backends in any language.

Served by the console process with the console's own auth (``Guard``: its
token as ``Authorization: Bearer``, or the auth proxy's header; loopback
without either), so a Node or Java backend forwards an agent's answer to its
own frontend without a Temporal SDK. Each event is one folded item
(``client/transcript.py``): ``id`` its stream position, ``event`` its kind
(``text`` for a piece of the answer, ``turn_ended`` with ``agrees`` last),
``data`` JSON. The console follows the session through its one feed
(``client/session_stream.py``): a thousand connections cost the session
one query poller and no Update.

| parameter                        | meaning                                                          |
|----------------------------------|------------------------------------------------------------------|
| ``Last-Event-ID`` header         | resume after this position (what a reconnecting ``EventSource`` sends) |
| ``after`` (query)                | the same, without headers; ``turn`` (default): the latest turn's start |
| ``until=turn_ended`` (query)     | end the response after the next ``turn_ended`` (one answer per request) |

A position that is not a whole number of at least -1 is refused with 400
``StreamPositionError``; an unknown session with 404. The stream ends with
``event: end`` when the session's workflow ends.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import aclosing

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from ..client.session_stream import After, follow
from ..contracts.errors import StreamPositionError
from .security import Guard, MalformedIdentity

PATH = "/api/sessions/{workflow_id}/events"
_LONGEST_POSITION = 19
_ASCII_INT = re.compile(r"-?[0-9]+")


def resume_position(request: Request) -> After:
    """Where the reader resumes: ``Last-Event-ID`` first, then ``?after=``; the latest turn's start by default."""
    raw = request.headers.get("last-event-id")
    if raw is None:
        raw = request.query_params.get("after")
    if raw is None or raw.strip() == "turn":
        return "turn"
    text = raw.strip()
    if not _ASCII_INT.fullmatch(text) or len(text) > _LONGEST_POSITION or int(text) < -1:
        raise StreamPositionError(
            f"a stream position is a whole number of at least -1 (the id of the last event read), not {raw[:40]!r}"
        )
    return int(text)


async def _events(client: Client, session_id: str, after: After, until_turn_end: bool) -> AsyncIterator[dict[str, str]]:
    async with aclosing(follow(client, session_id, after=after)) as items:
        async for item in items:
            yield {"id": str(item.position), "event": item.kind, "data": json.dumps(item.wire())}
            if until_turn_end and item.kind == "turn_ended":
                return
    yield {"event": "end", "data": "{}"}


def session_events_route(client: Client, guard: Guard) -> Route:
    async def events(request: Request) -> Response:
        if not guard.host_ok(request):
            return _refused(403, "ConsoleAuth", "this console answers at its loopback address only")
        try:
            guard.identity(request)  # the proxy's header must hold a name, as on every page
        except MalformedIdentity as exc:
            return _refused(400, "ConsoleAuth", str(exc))
        if not guard.allowed(request):
            return _refused(401, "ConsoleAuth", "sign in: Authorization: Bearer <console token>, or your auth proxy")
        session_id = request.path_params["workflow_id"]
        try:
            after = resume_position(request)
        except StreamPositionError as exc:
            return _refused(400, type(exc).__name__, str(exc))
        until = request.query_params.get("until", "")
        if until not in ("", "turn_ended"):
            return _refused(400, StreamPositionError.__name__, f"until takes turn_ended, not {until[:40]!r}")
        try:
            await client.get_workflow_handle(session_id).describe()
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return _refused(404, "NotFound", f"no session {session_id[:200]!r}")
            return _refused(502, "TemporalUnavailable", f"Temporal did not answer ({exc.message})")
        # Plain "\n" line ends: what curl, grep and line-based readers in any language expect.
        response = EventSourceResponse(_events(client, session_id, after, until == "turn_ended"), ping=15, sep="\n")
        response.headers["Cache-Control"] = "no-store"
        return response

    return Route(PATH, events, methods=["GET"])


def _refused(status: int, kind: str, message: str) -> Response:
    return JSONResponse({"error": kind, "message": message}, status_code=status)


__all__ = ["PATH", "resume_position", "session_events_route"]
