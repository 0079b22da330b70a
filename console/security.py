"""Who may use the console, and proof that a form was sent by the console's own page.

| bound to             | configured               | a request is let in when                         |
|----------------------|--------------------------|--------------------------------------------------|
| loopback             | nothing                  | always (the machine's own user)                  |
| anything             | ``token``                | its cookie or ``Authorization: Bearer`` matches  |
| anything             | ``proxy_user_header``    | the deployment's auth proxy set that header      |
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


def check_binding(settings: ConsoleSettings) -> None:
    if is_loopback(settings.host) or settings.token is not None or settings.proxy_user_header:
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
        if self.settings.token is not None or self.settings.proxy_user_header:
            return True
        host = request.headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]", 1)[0] + "]"
        return is_loopback(name.strip("[]"))

    # ------------------------------------------------------------ who
    def auth_cookie_value(self) -> str:
        assert self.settings.token is not None
        token = self.settings.token.get_secret_value().encode()
        return hmac.new(token, b"agentsteps-console-auth-v1", hashlib.sha256).hexdigest()

    def token_matches(self, offered: str) -> bool:
        token = self.settings.token
        return token is not None and hmac.compare_digest(offered.encode(), token.get_secret_value().encode())

    def allowed(self, request: Request) -> bool:
        if self.settings.proxy_user_header:
            return bool(request.headers.get(self.settings.proxy_user_header, "").strip())
        if self.settings.token is not None:
            bearer = request.headers.get("authorization", "")
            if bearer.lower().startswith("bearer ") and self.token_matches(bearer[7:].strip()):
                return True
            return hmac.compare_digest(request.cookies.get(AUTH_COOKIE, ""), self.auth_cookie_value())
        return True

    def person(self, request: Request) -> str:
        """The approver's name: the auth proxy's, else what the person typed (remembered in a cookie)."""
        if self.settings.proxy_user_header:
            return request.headers.get(self.settings.proxy_user_header, "").strip()[:200]
        return request.cookies.get(NAME_COOKIE, "")[:200]

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
    "NAME_COOKIE",
    "check_binding",
    "is_loopback",
    "new_browser_id",
]
