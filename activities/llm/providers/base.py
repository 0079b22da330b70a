"""What every LLM provider is, and the single SDK exchange they all share.

Providers hold no retry logic: the SDK clients are built with ``max_retries=0``
and Temporal retries the ``llm.call`` activity, so each attempt is visible in
history and retries never multiply.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, NamedTuple, Protocol, TypeVar

import httpx2
import opentelemetry.trace
from pydantic import BaseModel, ValidationError

from ....contracts.llm.prefix import Folds
from ....contracts.llm.request import LLMRequest, LLMResponse
from .errors import DEFAULT_RETRY_AFTER_CAP, classify_sdk_error, json_body, malformed

M = TypeVar("M", bound=BaseModel)


class Provider(Protocol):
    name: str

    async def complete(self, request: LLMRequest, folds: Folds | None = None) -> LLMResponse:
        """One provider call; raises ``RetryableProviderError`` or ``NonRetryableProviderError``.

        ``folds`` may spare re-encoding the conversation's stored prefix; the request sent is the same.
        """
        ...

    async def stream(
        self, request: LLMRequest, on_text: Callable[[str], None], folds: Folds | None = None
    ) -> LLMResponse:
        """The same call streamed: answer text goes to ``on_text`` as it arrives; returns what ``complete`` would."""
        ...


class RawResponse(Protocol):
    """The HTTP response of one SDK call (``...with_raw_response.create(...).http_response``,
    or ``client.post(..., cast_to=httpx.Response)``)."""

    @property
    def content(self) -> bytes: ...


async def sdk_call(
    provider: str,
    call: Callable[[], Awaitable[RawResponse]],
    *,
    secret: str | None,
    retry_after_cap: float | None = DEFAULT_RETRY_AFTER_CAP,
) -> dict[str, Any]:
    """Run one raw SDK call and return the JSON body; every failure becomes a typed provider error.

    The raw body is parsed here, not by the SDK, so a malformed answer is a typed
    error naming what is wrong instead of a half-built model.
    """
    secrets = (secret,)
    try:
        content = (await call()).content
    except Exception as exc:  # noqa: BLE001 - the one edge: everything the SDK raises is classified
        error = classify_sdk_error(provider, exc, secrets, retry_after_cap)
    else:
        return json_body(provider, content, secrets)
    # Raised outside the except block, so the SDK exception (whose text may hold
    # the key) is neither the cause nor the context of what reaches history.
    raise error


# The JSON settings both Stainless SDKs (openai, anthropic) encode a request body with (``_utils._json.openapi_dumps``),
# built once here: the bodies hold only strings, numbers, booleans, None, lists and dicts, which their encoder's
# ``default`` (dates, pydantic models) never sees. tests/activities/test_prefix_cache.py and test_prepared_post.py
# compare with what the SDKs send.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def sdk_json(value: Any) -> bytes:
    """``value`` as the SDKs encode a request body."""
    return _ENCODER.encode(value).encode()


def sdk_would_trace(client: Any) -> bool:
    """Whether a call by the SDK's own method would open its span, and send the trace context with the request.

    The SDK opens one for a call when a process-wide tracer provider records it, or when the current span
    (``llm_span``) has a valid context, which it then propagates (``traceparent``). A kept request carries
    neither, so such a call goes through the SDK.
    """
    if getattr(client, "_tracer", None) is None:
        return False
    if opentelemetry.trace.get_current_span().get_span_context().is_valid:
        return True
    return not isinstance(opentelemetry.trace.get_tracer_provider(), opentelemetry.trace.ProxyTracerProvider)


class _Kept(NamedTuple):
    """A request the SDK built, kept without its body, and the SDK's error for a non-2xx answer to it."""

    url: httpx2.URL
    headers: list[tuple[bytes, bytes]]
    extensions: dict[str, Any]
    status_error: Callable[[httpx2.Response], Exception]


DEFAULT_OPTIONS: Any = object()
"""``PreparedPost.send``'s timeout when the call has none of its own: the options the post was made with."""

_UNBUILT: Any = object()


def _timeout_key(timeout: Any) -> Hashable:
    return tuple(timeout.as_dict().items()) if isinstance(timeout, httpx2.Timeout) else timeout


class PreparedPost:
    """One SDK client's POST to one path, built by the SDK once and sent with each call's body.

    A Stainless SDK (openai, anthropic) rebuilds the same request on every call: its options model, the
    header merge, platform headers, auth hooks, the URL join, its retry loop: about half the worker's CPU
    for a model call (``bench/provider_post.py``: 0.79 against 0.39 ms). Apart from the body, the request is
    a function of the client and the options, which a provider fixes at construction, and of the call's
    timeout where the SDK derives one per call (Anthropic, from ``max_tokens`` and the model), so the SDK's
    own ``_build_request`` builds it once per timeout and each call sends that request with its body through
    the SDK's HTTP client, raising the SDK's own status error for a non-2xx answer. A client whose request
    can change from call to call (a key provider, a provider runtime, workload identity, custom auth, an
    idempotency header, middleware), or an SDK whose internals moved, posts through the SDK's ``post`` as
    before. tests/activities/test_prepared_post.py checks that both send the same request.
    """

    _VARYING = (
        "_api_key_provider",
        "_provider_runtime",
        "_workload_identity_auth",
        "workload_identity",
        "custom_auth",
        "_idempotency_header",
        "_middleware",
    )
    """Client attributes that, when set, can make one call's request differ from the next one's."""

    _MAX_KEPT = 4
    """Requests kept per post, one per timeout: a timeout that changed on every call would not be kept."""

    def __init__(
        self,
        client: Any,
        http: httpx2.AsyncClient,
        path: str,
        options: Mapping[str, Any],
        options_class: type[Any] | None,
    ) -> None:
        self._client = client
        self._http = http
        self._path = path
        self._options = dict(options)
        self._options_class = options_class
        self._kept: dict[Hashable, _Kept | None] = {}

    @property
    def prepared(self) -> bool:
        """Whether calls skip the SDK's per-call build (known after the first call)."""
        return any(kept is not None for kept in self._kept.values())

    async def send(self, body: bytes, timeout: Any = DEFAULT_OPTIONS) -> httpx2.Response:
        """POST ``body``; ``timeout`` (a float, ``httpx2.Timeout`` or None) is this call's request timeout."""
        options = self._options if timeout is DEFAULT_OPTIONS else {**self._options, "timeout": timeout}
        key = _timeout_key(timeout)
        kept = self._kept.get(key, _UNBUILT)
        if kept is _UNBUILT:
            if len(self._kept) >= self._MAX_KEPT:
                kept = None
            else:
                kept = self._kept[key] = await self._build(options)
        if kept is None:
            response: httpx2.Response = await self._client.post(
                self._path, cast_to=httpx2.Response, content=body, options=options
            )
            return response
        response = await self._http.send(
            httpx2.Request("POST", kept.url, headers=kept.headers, content=body, extensions=dict(kept.extensions))
        )
        if not response.is_success:
            raise kept.status_error(response)  # what the SDK's post raises for it, so classified alike
        return response

    async def _build(self, options: Mapping[str, Any]) -> _Kept | None:
        if self._options_class is None or any(getattr(self._client, name, None) for name in self._VARYING):
            return None
        try:
            built = self._options_class.construct(method="post", url=self._path, content=b"", **options)
            built = await self._client._prepare_options(built)
            request: httpx2.Request = self._client._build_request(built)
            await self._client._prepare_request(request)
            status_error = self._client._make_status_error_from_response
        except (AttributeError, TypeError):  # the SDK's internals moved: its own post still works
            return None
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
        return _Kept(request.url, headers, dict(request.extensions), status_error)


def parse_wire(model: type[M], provider: str, body: dict[str, Any]) -> M:
    """Validate a response body with the SDK's own model; a mismatch is a typed error, never a KeyError."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '$'}: {err['msg']}" for err in exc.errors()[:3])
        raise malformed(provider, problems) from None
