"""The console's routes: pages rendered on the server, forms posted back, one event stream.

| route                              | what                                               |
|------------------------------------|----------------------------------------------------|
| GET  /approvals (/approvals/live)  | the inbox: every call waiting, across runs/sessions|
| POST /approvals/decide             | approve or reject, with a note and a name          |
| GET  /runs                         | runs and sessions, filtered, from visibility       |
| GET  /runs/{id}                    | a run's timeline                                   |
| GET  /sessions/{id} (/stream)      | a session, its turns, its live progress (SSE)      |
| POST /sessions/{id}/turn, /close   | send a turn, close the session                     |
| GET/POST /login                    | the token, when one is configured                  |
| GET  /api/sessions/{id}/events     | a session's events for backends (SSE, session_events.py) |

Every response passes ``Guard`` (security.py); every POST checks the CSRF
field first. Templates autoescape; the CSP allows only this page's own inline
script and style (a per-response nonce).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from ..contracts.approvals import decision_link_signature
from ..contracts.config.settings import ConsoleSettings, PriceTable
from ..contracts.errors import StreamPositionError
from ..contracts.names import SESSION_WORKFLOW
from . import live, present, reads, refusals, writes
from .security import AUTH_COOKIE, BROWSER_COOKIE, CSRF_FIELD, NAME_COOKIE, Guard, MalformedIdentity, new_browser_id
from .session_events import resume_position, session_events_route
from .stream import progress_events

Handler = Callable[[Request], Awaitable[Response]]
_log = logging.getLogger("agentsteps.console")
_TEMPLATES = Path(__file__).parent / "templates"
_FLASH_KEPT = 500


class Console:
    def __init__(self, client: Client, settings: ConsoleSettings, prices: PriceTable | None = None) -> None:
        self.client = client
        self.settings = settings
        self.prices = prices or PriceTable()
        self.guard = Guard(settings)
        self.flashes: OrderedDict[str, writes.Told] = OrderedDict()
        self.env = Environment(
            loader=FileSystemLoader(str(_TEMPLATES)),
            autoescape=select_autoescape(default=True, default_for_string=True),
        )
        self.env.globals.update(
            number=present.number,
            money=present.money,
            when=present.when,
            iso=present.iso,
            card_key=present.card_key,
            headline=present.headline,
            summary=present.summary,
            link=present.link,
            output=present.output,
            arguments=present.arguments,
            step_kind=present.step_kind,
            quote=lambda s: quote(s, safe=""),
            statuses=list(reads.STATUSES),
            since=list(reads.SINCE),
        )

    # ------------------------------------------------------------------ plumbing

    def page(self, handler: Handler, *, post: bool = False) -> Handler:
        async def wrapped(request: Request) -> Response:
            request.state.new_browser_id = "" if request.cookies.get(BROWSER_COOKIE) else new_browser_id()
            request.state.nonce = secrets.token_urlsafe(16)
            if not self.guard.host_ok(request):
                return self._finish(
                    request, Response("this console answers at its loopback address only", status_code=403)
                )
            try:
                request.state.identity = self.guard.identity(request)
            except MalformedIdentity as exc:
                request.state.identity = ""
                return self._finish(
                    request,
                    self.render(
                        request, "message.html", heading="Not signed in", tone="bad", status=400, text=str(exc)
                    ),
                )
            if not self.guard.allowed(request) and (request.url.path != "/login" or self.guard.proxied):
                if self.guard.proxied:
                    response: Response = self.render(
                        request,
                        "message.html",
                        heading="Not signed in",
                        tone="bad",
                        status=401,
                        text="This console is reached through your organisation's sign-in; open it through that.",
                    )
                elif (
                    request.method == "GET"
                    and not request.url.path.endswith(("/live", "/stream", "/events"))
                    and not request.url.path.startswith("/events/")
                ):
                    response = RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
                else:
                    response = Response("sign in first", status_code=401)
                return self._finish(request, response)
            if post:
                form = await request.form()
                if not self.guard.csrf_ok(request, str(form.get(CSRF_FIELD, ""))):
                    response = self.render(
                        request,
                        "message.html",
                        heading="Please try again",
                        tone="bad",
                        status=403,
                        text=(
                            "This form is out of date (or did not come from this console). "
                            "Reload the page and send it again."
                        ),
                    )
                    return self._finish(request, response)
                request.state.form = form
            try:
                response = await handler(request)
            except reads.BadFilter as exc:
                response = self.render(
                    request, "message.html", heading="Not a filter", tone="bad", text=str(exc), status=400
                )
            except RPCError as exc:
                response = self.render(
                    request,
                    "message.html",
                    heading="Temporal did not answer",
                    tone="bad",
                    status=502,
                    text=f"The console could not reach Temporal ({exc.message}). Try again in a moment.",
                )
            except Exception:  # a page, never a stack trace; the trace goes to the console's log
                _log.exception("console page %s failed", request.url.path)
                response = self.render(
                    request,
                    "message.html",
                    heading="Something went wrong",
                    tone="bad",
                    status=500,
                    text="The console could not build this page; its log says why.",
                )
            return self._finish(request, response)

        return wrapped

    def _finish(self, request: Request, response: Response) -> Response:
        if request.state.new_browser_id:
            response.set_cookie(
                BROWSER_COOKIE,
                request.state.new_browser_id,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
            )
        nonce = request.state.nonce
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Cache-Control"] = "no-store"
        return response

    def render(self, request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        flash = self.flashes.pop(request.query_params.get("flash", ""), None)
        return HTMLResponse(self.fragment(request, template, flash=flash, **context), status_code=status)

    def fragment(self, request: Request, template: str, **context: Any) -> str:
        """A template as text: a whole page, or a part the live stream sends (a card, a run's timeline)."""
        return self.env.get_template(template).render(
            nonce=request.state.nonce,
            csrf=self.guard.csrf_token(request),
            person=self.guard.person(request),
            identity=getattr(request.state, "identity", ""),
            proxied=self.guard.proxied,
            **context,
        )

    def told(self, told: writes.Told, to: str) -> RedirectResponse:
        """Post/redirect/get: the message waits under a random id the redirect names."""
        key = secrets.token_urlsafe(12)
        self.flashes[key] = told
        while len(self.flashes) > _FLASH_KEPT:
            self.flashes.popitem(last=False)
        separator = "&" if "?" in to else "?"
        return RedirectResponse(f"{to}{separator}flash={key}", status_code=303)

    # ------------------------------------------------------------------ sign in

    async def login(self, request: Request) -> Response:
        target = request.query_params.get("next", "/approvals")
        if not self.guard.signs_in:
            return RedirectResponse("/approvals", status_code=303)
        return self.render(request, "login.html", nav="", next=_local(target))

    async def login_post(self, request: Request) -> Response:
        form = request.state.form
        offered = str(form.get("token", ""))
        if not self.guard.signs_in or not self.guard.token_matches(offered):
            return self.render(
                request,
                "message.html",
                heading="Not signed in",
                tone="bad",
                status=401,
                text="That token is not this console's. Ask whoever runs it.",
            )
        response = RedirectResponse(_local(str(form.get("next", "/approvals"))), status_code=303)
        response.set_cookie(
            AUTH_COOKIE,
            self.guard.auth_cookie_value(offered),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    # ------------------------------------------------------------------ approvals

    async def approvals(self, request: Request) -> Response:
        waiting = await reads.inbox(self.client)
        return self.render(request, "approvals.html", nav="approvals", waiting=waiting, live_url="/approvals/events")

    async def approvals_events(self, request: Request) -> Response:
        async def look() -> live.Snapshot:
            waiting = await reads.inbox(self.client)
            return live.Snapshot(waiting, [_key(w) for w in waiting])

        return EventSourceResponse(live.events(request, "inbox", look, self._card(request, "/approvals")), ping=15)

    async def decision_link(self, request: Request) -> Response:
        """A notice's signed approve/reject link: a confirmation page behind the console's sign-in. The link
        never decides by itself (a chat's link preview opens it too); a forged, altered or expired one is
        refused, and one whose call no longer waits says what became of it."""
        q = request.query_params
        workflow_id, approval_id, decision = q.get("w", ""), q.get("a", ""), q.get("d", "")
        expires, offered = q.get("exp", ""), q.get("sig", "")
        secret = self.settings.link_secret
        genuine = (
            secret is not None
            and decision in ("approve", "reject")
            and expires.isdigit()
            and len(expires) < 12
            and hmac.compare_digest(
                offered.encode(),
                decision_link_signature(
                    secret.get_secret_value(), workflow_id, approval_id, decision, int(expires)
                ).encode(),
            )
        )
        if not genuine:
            return self.render(
                request,
                "message.html",
                heading="Not a link from this deployment",
                tone="bad",
                status=403,
                text="This link was not signed by this deployment, or was changed. Nothing was decided.",
            )
        if int(expires) < time.time():
            return self.render(
                request,
                "message.html",
                heading="This link has expired",
                tone="bad",
                status=410,
                text=f"It expired with its call, {refusals.at(datetime.fromtimestamp(int(expires), timezone.utc))}. "
                "Nothing was decided.",
            )
        try:
            row = reads.row_of(await reads.describe(self.client, workflow_id))
            waiting = [p for p in await reads.pending(self.client, workflow_id) if p.approval_id == approval_id]
        except RPCError:
            row, waiting = None, []
        if row is None or not waiting:
            running = row is not None and row.status == "running"
            told = await writes.what_became_of(self.client, workflow_id, approval_id, running)
            return self.render(request, "message.html", heading="Nothing to decide", tone="bad", text=told)
        return self.render(
            request,
            "confirm.html",
            nav="approvals",
            decision=decision,
            waiting=[reads.Waiting(row, waiting[0])],
            back="/approvals",
        )

    def _card(self, request: Request, back: str) -> Callable[[reads.Waiting], str]:
        return lambda w: self.fragment(request, "card.html", w=w, back=back)

    async def approvals_live(self, request: Request) -> Response:
        waiting = await reads.inbox(self.client)
        return self.render(request, "inbox_items.html", waiting=waiting)

    async def decide(self, request: Request) -> Response:
        form = request.state.form
        decision = str(form.get("decision", ""))
        workflow_id, approval_id = str(form.get("workflow_id", "")), str(form.get("approval_id", ""))
        back = _local(str(form.get("back", "/approvals")))
        if decision not in ("approve", "reject") or not workflow_id or not approval_id:
            return self.told(writes.Told("Not recorded: the form lacked the call or the decision.", "bad"), back)
        # The identity the console verified (the proxy's header, a person's own token); typed only without one.
        identity = request.state.identity
        name = identity or str(form.get("name", "")).strip()[:200]
        told = await writes.decide(
            self.client, workflow_id, approval_id, decision == "approve", str(form.get("note", "")), name
        )
        response = self.told(told, back)
        if not identity and name:
            response.set_cookie(
                NAME_COOKIE, name, httponly=True, samesite="strict", secure=request.url.scheme == "https"
            )
        return response

    # ------------------------------------------------------------------ runs and sessions

    async def runs(self, request: Request) -> Response:
        filters = reads.Filters.parse(dict(request.query_params))
        page = await reads.list_rows(self.client, filters, request.query_params.get("page", ""))
        params = {k: v for k, v in vars(filters).items() if v}
        next_link = "/runs?" + "&".join(f"{k}={quote(v)}" for k, v in {**params, "page": page.next_token}.items())
        return self.render(request, "runs.html", nav="runs", page=page, filters=filters, next_link=next_link)

    async def _described(self, request: Request) -> Any:
        workflow_id = request.path_params["workflow_id"]
        try:
            return await reads.describe(self.client, workflow_id)
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return self.render(
                    request,
                    "message.html",
                    heading="Not found",
                    tone="bad",
                    status=404,
                    text=f"No run or session has the id {workflow_id}.",
                )
            raise

    async def run(self, request: Request) -> Response:
        description = await self._described(request)
        if isinstance(description, Response):
            return description
        if description.workflow_type == SESSION_WORKFLOW:
            return RedirectResponse(present.link(reads.row_of(description)), status_code=303)
        view = await reads.run_view(self.client, description)
        live_url = f"/events/runs/{quote(view.row.workflow_id, safe='')}" if view.row.status == "running" else ""
        return self.render(request, "run.html", nav="runs", live_url=live_url, **self._run_context(view))

    def _run_context(self, view: reads.RunView) -> dict[str, Any]:
        totals = _run_totals(view)
        return {
            "view": view,
            "r": view.row,
            "totals": totals,
            "waiting": reads.urgent_first([reads.Waiting(view.row, p) for p in view.pending]),
            "back": present.link(view.row),
            "links": self._links(view.row, totals.model),
            "live_status": view.state.last_step if view.state else "",
            "handled": lambda s: present.handled(s, view.result, view.steps),
            "reprompt": present.reprompt,
            "mode": _mode(view),
        }

    async def run_events(self, request: Request) -> Response:
        workflow_id = request.path_params["workflow_id"]

        async def look() -> live.Snapshot:
            view = await reads.run_view(self.client, await reads.describe(self.client, workflow_id))
            context = self._run_context(view)
            waiting = context["waiting"]
            return live.Snapshot(
                waiting,
                [_key(w) for w in waiting],
                {
                    "facts": self.fragment(request, "run_facts.html", **context),
                    "live": self.fragment(request, "run_live.html", **context),
                },
                done=view.row.status != "running",
            )

        card = self._card(request, f"/runs/{quote(workflow_id, safe='')}")
        return EventSourceResponse(live.events(request, "run", look, card), ping=15)

    async def session(self, request: Request) -> Response:
        description = await self._described(request)
        if isinstance(description, Response):
            return description
        if description.workflow_type != SESSION_WORKFLOW:
            return RedirectResponse(present.link(reads.row_of(description)), status_code=303)
        view = await reads.session_view(self.client, description)
        st = view.state
        totals = _Totals(
            steps=st.steps if st else view.row.steps,
            tokens=st.usage.total_tokens if st else view.row.tokens,
            cost_usd=st.cost_usd if st else view.row.cost_usd,
            violations=st.violations if st else view.row.violations,
            model=view.row.model,
        )
        return self.render(
            request,
            "session.html",
            nav="runs",
            view=view,
            r=view.row,
            totals=totals,
            back=present.link(view.row),
            waiting=reads.urgent_first([reads.Waiting(view.row, p) for p in view.pending]),
            links=self._links(view.row, view.row.model),
            status_label=_SESSION_STATUS.get(st.status, "") if st and view.row.status == "running" else "",
            timeline_turn=(st.current_turn or st.turns) if st else None,
            handled=lambda s: present.handled(s, None, view.steps),
            reprompt=present.reprompt,
            mode=st.mode if st else "",
            stream_url=f"/sessions/{quote(view.row.workflow_id, safe='')}/stream",
            live_url=f"/events/sessions/{quote(view.row.workflow_id, safe='')}" if view.row.status == "running" else "",
        )

    async def session_events(self, request: Request) -> Response:
        """The session page's waiting calls, live (its answer streams on ``/stream``)."""
        workflow_id = request.path_params["workflow_id"]

        async def look() -> live.Snapshot:
            row = reads.row_of(await reads.describe(self.client, workflow_id))
            pending = await reads.pending(self.client, workflow_id) if row.status == "running" else []
            waiting = reads.urgent_first([reads.Waiting(row, p) for p in pending])
            return live.Snapshot(waiting, [_key(w) for w in waiting], done=row.status != "running")

        card = self._card(request, f"/sessions/{quote(workflow_id, safe='')}")
        return EventSourceResponse(live.events(request, "run", look, card), ping=15)

    async def session_stream(self, request: Request) -> Response:
        try:  # a browser's EventSource reconnects with Last-Event-ID: it gets exactly what it missed
            after = resume_position(request)
        except StreamPositionError:
            after = "turn"
        return EventSourceResponse(progress_events(self.client, request.path_params["workflow_id"], after), ping=15)

    async def session_turn(self, request: Request) -> Response:
        sid = request.path_params["workflow_id"]
        text = str(request.state.form.get("input", ""))
        told = await writes.send_turn(self.client, sid, text)
        return self.told(told, f"/sessions/{quote(sid, safe='')}")

    async def session_close(self, request: Request) -> Response:
        sid = request.path_params["workflow_id"]
        told = await writes.close(self.client, sid, str(request.state.form.get("reason", "")))
        return self.told(told, f"/sessions/{quote(sid, safe='')}")

    def _links(self, row: reads.Row, model: str) -> dict[str, str]:
        namespace = self.client.namespace
        return {
            "temporal": present.temporal_link(self.settings, namespace, row),
            "grafana": present.grafana_link(self.settings, namespace, row, model),
        }

    # ------------------------------------------------------------------ the app

    def app(self) -> Starlette:
        async def home(request: Request) -> Response:
            return RedirectResponse("/approvals", status_code=303)

        async def healthz(request: Request) -> Response:
            return Response("ok", media_type="text/plain")

        routes = [
            Route("/", self.page(home)),
            Route("/healthz", healthz),
            Route("/login", self.page(self.login), methods=["GET"]),
            Route("/login", self.page(self.login_post, post=True), methods=["POST"]),
            Route("/approvals", self.page(self.approvals)),
            Route("/approvals/live", self.page(self.approvals_live)),
            Route("/approvals/events", self.page(self.approvals_events)),
            Route("/approvals/link", self.page(self.decision_link)),
            Route("/events/runs/{workflow_id:path}", self.page(self.run_events)),
            Route("/events/sessions/{workflow_id:path}", self.page(self.session_events)),
            Route("/approvals/decide", self.page(self.decide, post=True), methods=["POST"]),
            Route("/runs", self.page(self.runs)),
            Route("/runs/{workflow_id:path}", self.page(self.run)),
            Route("/sessions/{workflow_id}/stream", self.page(self.session_stream)),
            Route("/sessions/{workflow_id}/turn", self.page(self.session_turn, post=True), methods=["POST"]),
            Route("/sessions/{workflow_id}/close", self.page(self.session_close, post=True), methods=["POST"]),
            Route("/sessions/{workflow_id}", self.page(self.session)),
            session_events_route(self.client, self.guard),
        ]
        return Starlette(routes=routes)


_SESSION_STATUS = {"idle": "open, idle", "running": "open, a turn is running", "closed": "closing"}


@dataclass(frozen=True)
class _Totals:
    """The numbers at the top of a run's or session's page."""

    steps: int | None
    tokens: int | None
    cost_usd: float | None
    violations: int | None
    model: str


def _run_totals(view: reads.RunView) -> _Totals:
    """A running run's live numbers (its state query), an ended one's result; visibility otherwise."""
    if view.result is not None:
        r = view.result
        return _Totals(
            steps=len(r.steps),
            tokens=r.usage.total_tokens,
            cost_usd=r.cost_usd,
            violations=len(r.violations),
            model=r.model or view.row.model,
        )
    if view.state is not None:
        s = view.state
        cost = sum(step.cost_usd for step in view.steps)
        return _Totals(
            steps=s.step,
            tokens=s.usage.total_tokens,
            cost_usd=cost,
            violations=s.violations,
            model=s.model or view.row.model,
        )
    row = view.row
    return _Totals(
        steps=row.steps, tokens=row.tokens, cost_usd=row.cost_usd, violations=row.violations, model=row.model
    )


def _mode(view: reads.RunView) -> str:
    if view.result is not None:
        return view.result.mode
    return view.state.mode if view.state is not None else ""


def _key(w: reads.Waiting) -> str:
    return present.card_key(w.row.workflow_id, w.pending.approval_id)


def _local(target: str) -> str:
    """Only this console's own paths: a redirect never leaves it (``//evil``, ``https://...`` become /approvals)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/approvals"
    return target


def build_app(client: Client, settings: ConsoleSettings, prices: PriceTable | None = None) -> Starlette:
    return Console(client, settings, prices).app()


__all__ = ["Console", "build_app"]
