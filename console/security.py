"""Who may use the console, and proof that a form was sent by the console's own page.

| bound to             | configured               | a request is let in when                         |
|----------------------|--------------------------|--------------------------------------------------|
| loopback             | nothing                  | always (the machine's own user)                  |
| anything             | ``token``                | its cookie or ``Authorization: Bearer`` matches  |
| anything             | ``people`` (name=token)  | as ``token``; the person is that token's name    |
| anything             | ``proxy_user_header``    | the deployment's auth proxy set that header      |

Who decides is the identity the console verified (``identity``): the proxy's
header, or the name of the person's own token. A header value that is not a
name (empty, over 200 characters, control characters such as a newline) is
refused (``MalformedIdentity``), never recorded; any other text is a name,
shown escaped like all text. Without a verified identity (loopback, the shared
``token``) the approver types a name, recorded as typed.
| not loopback         | neither                  | never: the console refuses to start              |

Without a token or a proxy, a request must also name a loopback ``Host``
(``127.0.0.1``, ``localhost``, ``[::1]``): another site's page whose name
resolves to 127.0.0.1 (DNS rebinding) gets nothing.

CSRF: every page gets a random browser id (an HttpOnly, SameSite=Strict
cookie); every form carries ``HMAC(secret, browser id)``; a POST whose field
does not match, or whose ``Origin`` is another site, is refused. The secret is
random per process, so a restart only asks the browser to reload the form.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field

from starlette.requests import Request

from ..contracts.config.settings import ConsoleSettings
from ..contracts.errors import ConsoleConfigError

BROWSER_COOKIE = "agentsteps_console_browser"
AUTH_COOKIE = "agentsteps_console_auth"
NAME_COOKIE = "agentsteps_console_name"
CSRF_FIELD = "csrf"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


MAX_IDENTITY = 200


class MalformedIdentity(ValueError):
    """The auth proxy's header holds something that is not a person's name."""


def check_binding(settings: ConsoleSettings) -> None:
    if is_loopback(settings.host) or settings.token is not None or settings.people or settings.proxy_user_header:
        return
    raise ConsoleConfigError(
        f"the console would listen on {settings.host}, beyond this machine, with no way to tell who calls it. "
        "Set a token (AGENTSTEPS_CONSOLE_TOKEN, [worker.console] token) or put it behind your auth proxy and "
        "name the header it sets (AGENTSTEPS_CONSOLE_PROXY_USER_HEADER); docs/console.md"
    )


@dataclass
class Guard:
    settings: ConsoleSettings
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    # ------------------------------------------------------------ where
    def host_ok(self, request: Request) -> bool:
        """Without a token or a proxy, only a loopback ``Host``: a page on another site whose name
        resolves to 127.0.0.1 (DNS rebinding) must not read or drive this console."""
        if self.settings.token is not None or self.settings.people or self.settings.proxy_user_header:
            return True
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]", 1)[0] + "]"
        return is_loopback(name.strip("[]"))

    # ------------------------------------------------------------ who
    def _cookie_of(self, token: str) -> str:
        return hmac.new(token.encode(), b"agentsteps-console-auth-v1", hashlib.sha256).hexdigest()

    def _tokens(self) -> list[tuple[str, str]]:
        """(name, token): the people's own tokens, then the shared one (no name)."""
        named = [(name, t.get_secret_value()) for name, t in self.settings.people.items()]
        shared = [("", self.settings.token.get_secret_value())] if self.settings.token is not None else []
        return named + shared

    @property
    def signs_in(self) -> bool:
        return bool(self._tokens())

    def auth_cookie_value(self, offered: str) -> str:
        """The cookie for the token offered at sign-in: an HMAC of it, never the token."""
        return self._cookie_of(offered)

    def _match(self, offered: str) -> tuple[str, str] | None:
        found = None
        for name, token in self._tokens():  # every one compared, in constant time each
            if hmac.compare_digest(offered.encode(), token.encode()) and found is None:
                found = (name, token)
        return found

    def token_matches(self, offered: str) -> bool:
        return self._match(offered) is not None

    def _signed_in_as(self, request: Request) -> tuple[str, str] | None:
        bearer = request.headers.get("authorization", "")
        if bearer.lower().startswith("bearer "):
            return self._match(bearer[7:].strip())
        cookie = request.cookies.get(AUTH_COOKIE, "")
        found = None
        for name, token in self._tokens():
            if hmac.compare_digest(cookie.encode(), self._cookie_of(token).encode()) and found is None:
                found = (name, token)
        return found

    def allowed(self, request: Request) -> bool:
        if self.settings.proxy_user_header:
            return bool(request.headers.get(self.settings.proxy_user_header, "").strip())
        if self.signs_in:
            return self._signed_in_as(request) is not None
        return True

    def identity(self, request: Request) -> str:
        """Who the console knows is asking (the proxy's header, a person's own token); "" when it does not.

        Raises ``MalformedIdentity`` for a proxy header that is not a name."""
        if self.settings.proxy_user_header:
            raw = request.headers.get(self.settings.proxy_user_header, "")
            name = raw.strip()
            if not name:
                return ""  # not signed in: ``allowed`` refuses the request
            if len(name) > MAX_IDENTITY or not name.isprintable():
                raise MalformedIdentity(
                    f"the {self.settings.proxy_user_header} header does not hold a name "
                    f"(printable, 1 to {MAX_IDENTITY} characters)"
                )
            return name
        signed = self._signed_in_as(request) if self.signs_in else None
        return signed[0] if signed is not None else ""

    def person(self, request: Request) -> str:
        """The approver's name as shown: the verified identity, else what the person typed last (a cookie)."""
        try:
            who = self.identity(request)
        except MalformedIdentity:
            return ""
        return who or request.cookies.get(NAME_COOKIE, "")[:MAX_IDENTITY]

    @property
    def proxied(self) -> bool:
        return bool(self.settings.proxy_user_header)

    # ------------------------------------------------------------ CSRF
    @staticmethod
    def browser_id(request: Request) -> str:
        return request.cookies.get(BROWSER_COOKIE, "") or request.state.new_browser_id

    def csrf_token(self, request: Request) -> str:
        return hmac.new(self.secret, self.browser_id(request).encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, request: Request, offered: str) -> bool:
        browser = request.cookies.get(BROWSER_COOKIE, "")
        if not browser or not offered:
            return False
        expected = hmac.new(self.secret, browser.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(offered, expected):
            return False
        origin = request.headers.get("origin")
        if origin is None or origin == "null":  # a privacy setting may hide it; the field still proves the page
            return True
        return origin.split("://", 1)[-1] == request.headers.get("host", "")


def new_browser_id() -> str:
    return secrets.token_urlsafe(24)


__all__ = [
    "AUTH_COOKIE",
    "BROWSER_COOKIE",
    "CSRF_FIELD",
    "ConsoleConfigError",
    "Guard",
    "MalformedIdentity",
    "NAME_COOKIE",
    "check_binding",
    "is_loopback",
    "new_browser_id",
]
