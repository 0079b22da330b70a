"""The one place where HTTP answers and httpx exceptions become provider errors.

    status 408, 409, 429, 5xx          -> RetryableProviderError(status, retry_after)
    other 3xx/4xx (400, 401, 403, ...)  -> NonRetryableProviderError(provider's message)
    httpx timeouts, network errors,
    remote protocol errors (resets)     -> RetryableProviderError
    other httpx request errors          -> NonRetryableProviderError
    a 2xx body that does not parse      -> NonRetryableProviderError("malformed provider response: ...")

Every message passes through ``redact`` so an API key echoed by a provider
("Incorrect API key provided: sk-...") never reaches history or logs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from ...contracts.errors import NonRetryableProviderError, ProviderError, RetryableProviderError

RETRYABLE_STATUSES = frozenset({408, 409, 429})
_MAX_MESSAGE = 500


def redact(text: str, secrets: Sequence[str | None]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def parse_retry_after(headers: httpx.Headers, now: float | None = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def provider_message(response: httpx.Response) -> str:
    """The provider's own error text: ``{"error": {"message": ...}}`` in both wire formats."""
    try:
        body: Any = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"][:_MAX_MESSAGE]
        if isinstance(error, str):
            return error[:_MAX_MESSAGE]
        if isinstance(body.get("message"), str):
            return body["message"][:_MAX_MESSAGE]
    text = response.text.strip()
    return text[:_MAX_MESSAGE] if text else response.reason_phrase or "no error message"


def classify_response(provider: str, response: httpx.Response, secrets: Sequence[str | None] = ()) -> ProviderError:
    """The error for a non-2xx response."""
    status = response.status_code
    message = redact(f"{provider} HTTP {status}: {provider_message(response)}", secrets)
    if status in RETRYABLE_STATUSES or status >= 500:
        return RetryableProviderError(message, status=status, retry_after=parse_retry_after(response.headers))
    return NonRetryableProviderError(message, status=status)


def classify_exception(provider: str, exc: httpx.HTTPError | httpx.InvalidURL,
                       secrets: Sequence[str | None] = ()) -> ProviderError:
    """The error for an httpx exception raised while sending or reading."""
    detail = redact(f"{provider} {type(exc).__name__}: {exc}".rstrip(": "), secrets)
    if isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError | httpx.ProxyError):
        return RetryableProviderError(detail)
    if isinstance(exc, httpx.DecodingError):
        return NonRetryableProviderError(f"malformed provider response: {detail}")
    return NonRetryableProviderError(detail)


@contextmanager
def translated_transport_errors(provider: str, secrets: Sequence[str | None] = ()) -> Iterator[None]:
    try:
        yield
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise classify_exception(provider, exc, secrets) from exc


def malformed(provider: str, detail: str, secrets: Sequence[str | None] = ()) -> NonRetryableProviderError:
    return NonRetryableProviderError(redact(f"malformed provider response from {provider}: {detail}", secrets))


def json_body(provider: str, response: httpx.Response, secrets: Sequence[str | None] = ()) -> dict[str, Any]:
    try:
        body = json.loads(response.content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise malformed(provider, f"body is not JSON ({exc}): {response.text[:200]!r}", secrets) from None
    if not isinstance(body, dict):
        raise malformed(provider, f"body is a JSON {type(body).__name__}, expected an object", secrets)
    return body
