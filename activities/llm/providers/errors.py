"""The one edge where what the SDKs raise becomes the project's provider errors.

    HTTP status 408, 409, 429, 5xx         -> RetryableProviderError(status, retry_after)
    other 3xx/4xx (400, 401, 403, ...)     -> NonRetryableProviderError(provider's message)
    ``x-should-retry: true|false``         -> overrides the status rule, as the SDKs do
    timeouts, network errors, resets       -> RetryableProviderError
    other transport errors (bad URL ...)   -> NonRetryableProviderError
    a 2xx body that does not parse         -> NonRetryableProviderError("malformed provider response: ...")
    an error event inside a stream         -> by its code (the status rule), else its type: a rejected
                                              request (invalid_request, authentication, ...) is not
                                              retried; overloaded, server errors and unnamed ones are
    any other SDK error                    -> NonRetryableProviderError

The SDKs' own retries are off (``max_retries=0``): Temporal is the only retrier,
so the delay a provider asks for is handed to it, capped so that a provider
asking for an hour (or a date decades away) cannot park a run.

The SDKs are never imported here: an SDK this process never imported raised
nothing, so its classes are looked up in ``sys.modules`` when an error is
classified (``sdk_errors``), and a worker using one provider never loads the other.

Every message passes through ``redact`` and no SDK exception is chained as a
cause: their text can echo the request's key ("Incorrect API key: sk-..."), and
Temporal records causes in history.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import httpx2

from ....contracts.errors import NonRetryableProviderError, ProviderError, RetryableProviderError

if TYPE_CHECKING:
    import anthropic
    import openai

RETRYABLE_STATUSES = frozenset({408, 409, 429})
DEFAULT_RETRY_AFTER_CAP = 120.0
_MAX_MESSAGE = 500
_RETRYABLE_TRANSPORT = (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError, httpx2.ProxyError)


_SDKS = ("openai", "anthropic")


def sdk_errors(name: str, sdks: Sequence[str] = _SDKS) -> tuple[type[Any], ...]:
    """The exception class ``name`` of each of ``sdks`` this process has imported (none for an SDK never
    imported: it raised nothing), without importing either."""
    return tuple(getattr(module, name) for module in map(sys.modules.get, sdks) if module is not None)


def status_errors() -> tuple[type[openai.APIStatusError] | type[anthropic.APIStatusError], ...]:
    return sdk_errors("APIStatusError")


def connection_errors() -> tuple[type[openai.APIConnectionError] | type[anthropic.APIConnectionError], ...]:
    return sdk_errors("APIConnectionError")


def _timeout_errors() -> tuple[type[openai.APITimeoutError] | type[anthropic.APITimeoutError], ...]:
    return sdk_errors("APITimeoutError")


def redact(text: str, secrets: Sequence[str | None]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def parse_retry_after(
    headers: httpx2.Headers | dict[str, str], now: float | None = None, cap: float | None = DEFAULT_RETRY_AFTER_CAP
) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), at most ``cap``."""
    headers = httpx2.Headers(headers)
    seconds = _retry_after(headers, time.time() if now is None else now)
    if seconds is None or cap is None:
        return seconds
    return min(seconds, cap)


def _retry_after(headers: httpx2.Headers, now: float) -> float | None:
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return _finite(float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return _finite(float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    return _finite(when.timestamp() - now)


def _finite(seconds: float) -> float | None:
    # "nan" and "inf" parse as floats; neither is a delay Temporal can use.
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return None
    return max(0.0, seconds)


def provider_message(response: httpx2.Response) -> str:
    """The provider's own error text: ``{"error": {"message": ...}}`` in both wire formats."""
    try:
        body: Any = json.loads(response.content)
    except (ValueError, UnicodeDecodeError, httpx2.ResponseNotRead):
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        nested = error.get("message") if isinstance(error, dict) else None
        if isinstance(nested, str):
            return nested[:_MAX_MESSAGE]
        if isinstance(error, str):
            return error[:_MAX_MESSAGE]
        message = body.get("message")
        if isinstance(message, str):
            return message[:_MAX_MESSAGE]
    text = response.text.strip()
    return text[:_MAX_MESSAGE] if text else response.reason_phrase or "no error message"


def _should_retry(headers: httpx2.Headers) -> bool | None:
    value = (headers.get("x-should-retry") or "").strip().lower()
    return {"true": True, "false": False}.get(value)


def classify_response(
    provider: str,
    response: httpx2.Response,
    secrets: Sequence[str | None] = (),
    cap: float | None = DEFAULT_RETRY_AFTER_CAP,
) -> ProviderError:
    """The error for a non-2xx response."""
    status = response.status_code
    message = redact(f"{provider} HTTP {status}: {provider_message(response)}", secrets)
    retry = _should_retry(response.headers)
    if retry is None:
        retry = status in RETRYABLE_STATUSES or status >= 500
    if retry:
        return RetryableProviderError(message, status=status, retry_after=parse_retry_after(response.headers, cap=cap))
    return NonRetryableProviderError(message, status=status)


def classify_exception(provider: str, exc: BaseException, secrets: Sequence[str | None] = ()) -> ProviderError:
    """The error for an HTTP-layer exception raised while sending or reading."""
    detail = redact(f"{provider} {type(exc).__name__}: {exc}".rstrip(": "), secrets)
    if isinstance(exc, _RETRYABLE_TRANSPORT):
        return RetryableProviderError(detail)
    if isinstance(exc, httpx2.DecodingError):
        return NonRetryableProviderError(f"malformed provider response: {detail}")
    return NonRetryableProviderError(detail)


def classify_sdk_error(
    provider: str, exc: Exception, secrets: Sequence[str | None] = (), cap: float | None = DEFAULT_RETRY_AFTER_CAP
) -> ProviderError:
    """The error for anything an SDK call raised."""
    if isinstance(exc, status_errors()):
        return classify_response(provider, exc.response, secrets, cap)
    if isinstance(exc, connection_errors()):
        # The SDK wraps the transport error; its type is what says whether to retry.
        cause = exc.__cause__
        if isinstance(exc, _timeout_errors()) and not isinstance(cause, Exception):
            return RetryableProviderError(redact(f"{provider} ReadTimeout: {exc}", secrets))
        return classify_exception(provider, cause if isinstance(cause, Exception) else exc, secrets)
    if isinstance(exc, httpx2.HTTPError | httpx2.InvalidURL):
        return classify_exception(provider, exc, secrets)
    return NonRetryableProviderError(redact(f"{provider} {type(exc).__name__}: {exc}", secrets))


_REJECTED_EVENT_TYPES = (
    "invalid_request",
    "badrequest",
    "bad_request",
    "authentication",
    "permission",
    "not_found",
    "notfound",
    "unprocessable",
    "context_length",
)


def stream_error(provider: str, body: Any, message: str, secrets: Sequence[str | None] = ()) -> ProviderError:
    """An error event inside a stream the server had accepted (vLLM, LiteLLM, OpenAI: ``{"error": {...}}``;
    Anthropic: ``{"type": "error", "error": {...}}``), typed by what it reports."""
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    error = error if isinstance(error, dict) else {}
    code = error.get("code", error.get("status"))
    status = int(code) if isinstance(code, int | str) and str(code).isdigit() and 100 <= int(code) <= 599 else None
    kind = str(error.get("type") or "").lower()
    detail = redact(
        f"{provider} error event in the stream{f' ({kind})' if kind else ''}: {message}"[:_MAX_MESSAGE], secrets
    )
    if status is not None:
        retry = status in RETRYABLE_STATUSES or status >= 500
    else:
        # The request was accepted and the stream began: unless the event names a rejected request,
        # the failure is the server's (overloaded, an upstream error) and passes.
        retry = not any(word in kind for word in _REJECTED_EVENT_TYPES)
    return RetryableProviderError(detail, status=status) if retry else NonRetryableProviderError(detail, status=status)


def malformed(provider: str, detail: str, secrets: Sequence[str | None] = ()) -> NonRetryableProviderError:
    return NonRetryableProviderError(redact(f"malformed provider response from {provider}: {detail}", secrets))


def json_body(provider: str, content: bytes, secrets: Sequence[str | None] = ()) -> dict[str, Any]:
    try:
        body = json.loads(content)
    except (ValueError, UnicodeDecodeError) as exc:
        text = content[:200].decode("utf-8", "replace")
        raise malformed(provider, f"body is not JSON ({exc}): {text!r}", secrets) from None
    if not isinstance(body, dict):
        raise malformed(provider, f"body is a JSON {type(body).__name__}, expected an object", secrets)
    return body
