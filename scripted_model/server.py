"""The scripted model server: a test double that speaks the OpenAI Chat
Completions and Anthropic Messages wire formats on loopback.

It is not a model. It answers from a ``Script`` so tests, the demo and the
benchmark exercise the real httpx provider code over real HTTP, including
injected faults (429 with Retry-After, 500, slow and malformed replies), and
provider rate limits (``Script.quotas``, enforced in ``quota.py``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .caching import PromptCache
from .matching import RequestView, Wire, matches, view_of
from .quota import QuotaGate, Refusal, Ticket
from .render import HttpAnswer, error_answer, prompt_tokens, render
from .script import Reply, Rule, Script
from .stats import ServerStats
from .streaming import anthropic_events, openai_events

_ROUTES: dict[str, Wire] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
}


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    wire: Wire
    headers: dict[str, str]
    """Lower-cased names, secrets included: tests assert on auth headers."""
    body: Any
    """The parsed JSON body, or the raw text when it was not JSON."""


class _ScriptState:
    """Which reply comes next; shared by the handler threads under one lock."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._rule_uses = [0] * len(script.rules)
        self._next_reply = 0
        self.serial = 0
        self.cache = PromptCache()
        self.gate = QuotaGate(script.quotas)
        self.stats = ServerStats()
        self.delays_ended = threading.Event()
        """Set by ``ScriptedModelServer.end_delays``: every reply delay and stream pause ends at once."""

    def choose(self, view: RequestView) -> tuple[Reply | None, int]:
        with self._lock:
            self.serial += 1
            for i, rule in enumerate(self.script.rules):
                if rule.times is not None and self._rule_uses[i] >= rule.times:
                    continue
                if matches(rule.match, view):
                    self._rule_uses[i] += 1
                    return (filled(rule, view) if rule.reply.fill else rule.reply), self.serial
            if self._next_reply < len(self.script.replies):
                self._next_reply += 1
                return self.script.replies[self._next_reply - 1], self.serial
            return self.script.default, self.serial


@dataclass
class _Outcome:
    """One request's answer and what to account for once it is sent."""

    state: _ScriptState
    model: str
    answer: HttpAnswer
    delay: float = 0.0
    ticket: Ticket | None = None
    refusal: Refusal | None = None
    finished: bool = field(default=False, repr=False)


def filled(rule: Rule, view: RequestView) -> Reply:
    """``rule.reply`` with ``{group}`` replaced by the named groups of ``rule.match.regex`` (see ``Reply.fill``)."""
    found = re.search(rule.match.regex, view.last_text) if rule.match.regex else None
    groups = {k: v for k, v in (found.groupdict() if found else {}).items() if v is not None}

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            for name, text in groups.items():
                value = value.replace("{" + name + "}", text)
            return value
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    reply = rule.reply
    calls = [c.model_copy(update={"arguments": fill(c.arguments)}) for c in reply.tool_calls]
    return reply.model_copy(update={"content": fill(reply.content), "json_": fill(reply.json_), "tool_calls": calls})


def _coerce(script: Script | dict[str, Any] | str | Path | None) -> Script:
    if script is None:
        return Script()
    if isinstance(script, Script):
        return script
    if isinstance(script, dict):
        return Script.model_validate(script)
    return Script.load(script)


class ScriptedModelServer:
    """``with ScriptedModelServer(script) as server:`` then point a client at
    ``server.url_openai`` or ``server.url_anthropic``."""

    def __init__(
        self, script: Script | dict[str, Any] | str | Path | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._state = _ScriptState(_coerce(script))
        self._host, self._port = host, port
        self._requests: list[RecordedRequest] = []
        self._requests_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> str:
        self._httpd = _Server((self._host, self._port), _Handler)
        self._httpd.owner = self
        # serve_forever checks for shutdown every poll_interval: the default 0.5 s was half a second per stop,
        # paid by every test that starts one.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-model", daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted model server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    @property
    def url_openai(self) -> str:
        """Base URL for an OpenAI-compatible client (it appends ``/chat/completions``)."""
        return f"{self.base_url}/v1"

    @property
    def url_anthropic(self) -> str:
        """Base URL for an Anthropic client (it appends ``/v1/messages``)."""
        return self.base_url

    # -- script and records ----------------------------------------------
    @property
    def script(self) -> Script:
        return self._state.script

    def set_script(self, script: Script | dict[str, Any] | str | Path) -> None:
        """Swap the script, restart its counters and forget recorded requests."""
        self._state = _ScriptState(_coerce(script))
        with self._requests_lock:
            self._requests.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, oldest first."""
        with self._requests_lock:
            return list(self._requests)

    def end_delays(self) -> None:
        """End every reply delay (``delay_seconds``, a stream's pauses) now in progress, and skip them for the
        rest of this script: a test holds a reply only as long as it checks what happens meanwhile."""
        self._state.delays_ended.set()

    def _record(self, request: RecordedRequest) -> None:
        with self._requests_lock:
            self._requests.append(request)

    def stats(self) -> dict[str, Any]:
        """What was answered since the script was set: ``requests``, ``status`` counts, ``http_429``
        (every 429 sent), ``quota_429`` (by the limit that refused), ``input_tokens``/``output_tokens``
        served, ``max_in_flight``, per-model tallies under ``models``, and each quota's current
        window under ``quotas``. Also served as ``GET /stats``."""
        state = self._state
        return {**state.stats.snapshot(), "quotas": state.gate.usage()}

    def answer(self, wire: Wire, headers: dict[str, str], body: Any) -> _Outcome:
        """The answer to one request; ``finish`` it once it is sent."""
        state = self._state
        model = body.get("model") if isinstance(body, dict) else None
        outcome = _Outcome(state, model if isinstance(model, str) else "", HttpAnswer(500, b""))
        state.stats.began()
        try:
            outcome.answer, outcome.delay = self._answer(outcome, wire, headers, body)
        except BaseException:
            self.finish(outcome)  # its slot and its count are not held forever by a bug here
            raise
        if outcome.ticket is not None:
            counts = outcome.answer.counts if outcome.answer.status == 200 else None
            state.gate.settle(outcome.ticket, counts.prompt if counts else 0, counts.completion if counts else 0)
        return outcome

    def finish(self, outcome: _Outcome) -> None:
        """Free the request's concurrency slot and count what it was answered."""
        if outcome.finished:
            return
        outcome.finished = True
        if outcome.ticket is not None:
            outcome.state.gate.release(outcome.ticket)
        counts = outcome.answer.counts if outcome.answer.status == 200 else None
        outcome.state.stats.ended(
            outcome.model,
            outcome.answer.status,
            counts.prompt if counts else 0,
            counts.completion if counts else 0,
            outcome.refusal.limit if outcome.refusal else None,
        )

    def _answer(self, outcome: _Outcome, wire: Wire, headers: dict[str, str], body: Any) -> tuple[HttpAnswer, float]:
        state = outcome.state
        if not isinstance(body, dict):
            return error_answer(wire, 400, "request body is not a JSON object"), 0.0
        if not _authorised(state.script.api_key, wire, headers):
            return error_answer(wire, 401, "invalid API key", "authentication_error"), 0.0
        if wire == "anthropic" and (repeated := _repeated_tool_use_id(body)) is not None:
            # As the Messages API does: a conversation may not carry one tool_use id twice.
            return error_answer(wire, 400, f"messages: `tool_use` ids must be unique (repeated: {repeated!r})"), 0.0
        view = view_of(wire, body)
        # Before a reply is chosen: a refused request spends no ``times`` and no ``replies``.
        admitted = state.gate.admit(outcome.model, prompt_tokens(view), _max_tokens(body))
        if isinstance(admitted, Refusal):
            outcome.refusal = admitted
            return error_answer(wire, 429, admitted.message, headers=admitted.headers()), 0.0
        outcome.ticket = admitted
        reply, serial = state.choose(view)
        if reply is None:
            message = (
                f"scripted model: no rule matched and no replies are left "
                f"(last message role={view.last_role!r}, text={view.last_text[:200]!r})"
            )
            return error_answer(wire, 500, message, "no_rule_matched"), 0.0
        cache = state.cache.anthropic(body) if wire == "anthropic" else (state.cache.openai(body), 0)
        answer = render(wire, reply, view, serial, state.script.model, cache)
        if body.get("stream") is True and answer.status == 200 and reply.raw_body is None:
            rendered = json.loads(answer.body)
            if wire == "anthropic":
                answer.events = anthropic_events(rendered, reply.stream)
            else:
                options = body.get("stream_options")
                usage = isinstance(options, dict) and options.get("include_usage") is True
                answer.events = openai_events(rendered, reply.stream, usage)
            answer.event_delay = reply.stream.delay_seconds
        return answer, reply.delay_seconds


def _max_tokens(body: dict[str, Any]) -> int:
    """The completion the request allows (``max_tokens``, or OpenAI's ``max_completion_tokens``), else 0."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _repeated_tool_use_id(body: dict[str, Any]) -> str | None:
    seen: set[str] = set()
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                if block.get("id") in seen:
                    return str(block.get("id"))
                seen.add(str(block.get("id")))
    return None


def _authorised(key: str | None, wire: Wire, headers: dict[str, str]) -> bool:
    if key is None:
        return True
    # Anthropic takes either: ``x-api-key`` (older clients) or a bearer token (SDK 2.x).
    if wire == "anthropic" and headers.get("x-api-key") == key:
        return True
    return headers.get("authorization") == f"Bearer {key}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out closes its socket while a slow reply sleeps;
        # that is the point of the fault, not an error worth a traceback.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # Headers and body leave in one send, with Nagle off: otherwise Nagle and the
    # client's delayed ACK add ~40 ms to every reply, which the benchmark would measure.
    disable_nagle_algorithm = True
    wbufsize = 1 << 16

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(
        self,
        answer: HttpAnswer,
        before_last_write: Callable[[], None] | None = None,
        pause: Callable[[float], object] = time.sleep,
    ) -> None:
        if answer.events is not None:
            self._send_events(answer, before_last_write, pause)
            return
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        if before_last_write is not None:
            before_last_write()
        self.wfile.write(answer.body)
        self.wfile.flush()

    def _send_events(
        self, answer: HttpAnswer, before_last_write: Callable[[], None] | None, pause: Callable[[float], object]
    ) -> None:
        # No length is known up front: the stream ends when the connection closes,
        # which is also how a truncated stream looks to the client.
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        events = answer.events or []
        for i, event in enumerate(events):
            if i and answer.event_delay:
                pause(answer.event_delay)
            if i == len(events) - 1 and before_last_write is not None:
                before_last_write()
            self.wfile.write(event)
            self.wfile.flush()

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = self.server.owner.script.model or "scripted-model"
            self._send(
                HttpAnswer(
                    200,
                    json.dumps(
                        {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "agentsteps"}]}
                    ).encode(),
                )
            )
        elif self.path == "/healthz":
            self._send(HttpAnswer(200, b'{"ok": true}'))
        elif self.path == "/stats":
            self._send(HttpAnswer(200, json.dumps(self.server.owner.stats()).encode()))
        else:
            self._send(error_answer("openai", 404, f"no route for GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        wire = _ROUTES.get(path)
        if wire is None:
            self._send(error_answer("openai", 404, f"no route for POST {path}"))
            return
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner = self.server.owner
        owner._record(RecordedRequest(path=path, wire=wire, headers=headers, body=body))
        outcome = owner.answer(wire, headers, body)
        try:
            if outcome.delay:
                outcome.state.delays_ended.wait(outcome.delay)
            # Counted and its slot freed before the client can read the end of it: a client
            # that reads /stats, or sends its next request, right after sees it finished.
            self._send(outcome.answer, lambda: owner.finish(outcome), outcome.state.delays_ended.wait)
        finally:
            owner.finish(outcome)
