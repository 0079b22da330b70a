"""Provider rate limits for the scripted model: requests, tokens and concurrency per model.

A request is admitted or refused before any reply is chosen, as a provider
refuses before it does any work, so a refused request spends no ``times`` and
no ``replies``:

    concurrent_requests       in flight + 1            <= limit   else 429, Retry-After 1 s (at most the window)
    requests_per_minute       requests in window + 1   <= limit   else 429 until enough requests leave the window
    input_tokens_per_minute   input in window + prompt <= limit   else 429 until enough tokens leave the window
    output_tokens_per_minute  output in window + max_tokens <= limit   (a request without max_tokens counts 1)
    tokens_per_minute         both together

An admitted request is charged its estimate at once and corrected to the usage
it was actually sent (``settle``); a request answered with an error is charged
no tokens, only its request. A sliding window is the last ``window_seconds``;
a fixed one restarts every ``window_seconds`` from the server's start. The
Retry-After of a refusal is the time until the request would fit if nothing
else arrived: it never invites a retry that is certain to fail again.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .script import ANY_MODEL, Quota


@dataclass
class _Charge:
    at: float
    input: int
    output: int


@dataclass
class _Window:
    quota: Quota
    charges: deque[_Charge] = field(default_factory=deque)
    in_flight: int = 0


@dataclass(frozen=True)
class Refusal:
    limit: str
    """The quota field that refused: ``requests_per_minute``, ``tokens_per_minute``, ..."""
    message: str
    retry_after: float

    def headers(self) -> dict[str, str]:
        """``Retry-After`` in whole seconds (rounded up) and OpenAI's precise ``retry-after-ms``."""
        return {
            "Retry-After": str(max(1, math.ceil(self.retry_after))),
            "retry-after-ms": str(max(1, math.ceil(self.retry_after * 1000))),
        }


@dataclass
class Ticket:
    """An admitted request: its charge (corrected by ``settle``) and its concurrency slot."""

    window: _Window
    charge: _Charge
    released: bool = False


class QuotaGate:
    """Every model's window, under one lock shared by the handler threads."""

    def __init__(self, quotas: dict[str, Quota], clock: Callable[[], float] = time.monotonic) -> None:
        self._quotas = dict(quotas)
        self._clock = clock
        self._origin = clock()
        self._lock = threading.Lock()
        self._windows: dict[str, _Window] = {}

    def _quota_for(self, model: str) -> Quota | None:
        return self._quotas.get(model) or self._quotas.get(ANY_MODEL)

    def admit(self, model: str, prompt: int, max_tokens: int) -> Ticket | Refusal | None:
        """A ticket, a refusal, or ``None`` when no quota covers ``model``."""
        quota = self._quota_for(model)
        if quota is None:
            return None
        max_tokens = max(1, max_tokens)  # every reply is at least a token
        with self._lock:
            window = self._windows.setdefault(model, _Window(quota))
            now = self._clock()
            self._forget_old(window, now)
            refusal = self._refusal(window, model, now, prompt, max_tokens)
            if refusal is not None:
                return refusal
            charge = _Charge(now, prompt, max_tokens)
            window.charges.append(charge)
            window.in_flight += 1
            return Ticket(window, charge)

    def settle(self, ticket: Ticket, input_tokens: int, output_tokens: int) -> None:
        """Replace the estimate with what the reply really used."""
        with self._lock:
            ticket.charge.input, ticket.charge.output = input_tokens, output_tokens

    def release(self, ticket: Ticket) -> None:
        with self._lock:
            if not ticket.released:
                ticket.released = True
                ticket.window.in_flight -= 1

    def usage(self) -> dict[str, dict[str, object]]:
        """Per model: its limits and what its current window holds (for ``/stats``)."""
        with self._lock:
            now = self._clock()
            out: dict[str, dict[str, object]] = {}
            for model, window in self._windows.items():
                self._forget_old(window, now)
                out[model] = {
                    "limits": window.quota.model_dump(exclude_none=True),
                    "window": {
                        "requests": len(window.charges),
                        "input_tokens": sum(c.input for c in window.charges),
                        "output_tokens": sum(c.output for c in window.charges),
                        "in_flight": window.in_flight,
                    },
                }
            return out

    # -- inside the lock ----------------------------------------------------
    def _start(self, quota: Quota, now: float) -> float:
        if quota.window == "sliding":
            return now - quota.window_seconds
        elapsed = now - self._origin
        return self._origin + (elapsed // quota.window_seconds) * quota.window_seconds

    def _forget_old(self, window: _Window, now: float) -> None:
        start = self._start(window.quota, now)
        # A sliding window holds the last window_seconds, its start excluded; a fixed one, its start included.
        sliding = window.quota.window == "sliding"
        while window.charges and (window.charges[0].at <= start if sliding else window.charges[0].at < start):
            window.charges.popleft()

    def _refusal(self, window: _Window, model: str, now: float, prompt: int, max_tokens: int) -> Refusal | None:
        quota = window.quota
        if quota.concurrent_requests is not None and window.in_flight + 1 > quota.concurrent_requests:
            return Refusal(
                "concurrent_requests",
                f"Rate limit reached for {model} on concurrent requests: limit {quota.concurrent_requests}, "
                f"in flight {window.in_flight}.",
                min(1.0, quota.window_seconds),
            )
        checks: list[tuple[str, str, int | None, Callable[[_Charge], int], int]] = [
            ("requests_per_minute", "requests per min (RPM)", quota.requests_per_minute, lambda c: 1, 1),
            (
                "input_tokens_per_minute",
                "input tokens per min (ITPM)",
                quota.input_tokens_per_minute,
                lambda c: c.input,
                prompt,
            ),
            (
                "output_tokens_per_minute",
                "output tokens per min (OTPM)",
                quota.output_tokens_per_minute,
                lambda c: c.output,
                max_tokens,
            ),
            (
                "tokens_per_minute",
                "tokens per min (TPM)",
                quota.tokens_per_minute,
                lambda c: c.input + c.output,
                prompt + max_tokens,
            ),
        ]
        refused: list[Refusal] = []
        for name, words, limit, cost, needed in checks:
            if limit is None:
                continue
            used = sum(cost(c) for c in window.charges)
            if used + needed <= limit:
                continue
            wait = self._wait(window, now, cost, limit - needed)
            if needed > limit:
                message = (
                    f"Request too large for {model} on {words}: limit {limit}, requested {needed}. "
                    f"Lower max_tokens or the prompt."
                )
            else:
                message = (
                    f"Rate limit reached for {model} on {words}: limit {limit}, used {used}, "
                    f"requested {needed}. Please try again in {wait:.3f}s."
                )
            refused.append(Refusal(name, message, wait))
        if not refused:
            return None
        # The first limit names the refusal; the longest wait is when every limit would let it through.
        return Refusal(refused[0].limit, refused[0].message, max(r.retry_after for r in refused))

    def _wait(self, window: _Window, now: float, cost: Callable[[_Charge], int], room: int) -> float:
        """Seconds until the window's usage is at most ``room`` if nothing else arrives."""
        quota = window.quota
        if quota.window == "fixed":
            return self._start(quota, now) + quota.window_seconds - now
        if room < 0:
            return quota.window_seconds
        used = sum(cost(c) for c in window.charges)
        for charge in window.charges:
            used -= cost(charge)
            if used <= room:
                return max(0.0, charge.at + quota.window_seconds - now)
        return quota.window_seconds
