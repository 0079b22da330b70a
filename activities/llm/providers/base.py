"""What every LLM provider is, and the single SDK exchange they all share.

Providers hold no retry logic: the SDK clients are built with ``max_retries=0``
and Temporal retries the ``llm.call`` activity, so each attempt is visible in
history and retries never multiply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

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

    async def stream(self, request: LLMRequest, on_text: Callable[[str], None], folds: Folds | None = None
                     ) -> LLMResponse:
        """The same call streamed: answer text goes to ``on_text`` as it arrives; returns what ``complete`` would."""
        ...


class RawResponse(Protocol):
    """The HTTP response of one SDK call (``...with_raw_response.create(...).http_response``,
    or ``client.post(..., cast_to=httpx.Response)``)."""

    @property
    def content(self) -> bytes: ...


async def sdk_call(provider: str, call: Callable[[], Awaitable[RawResponse]], *,
                   secret: str | None, retry_after_cap: float | None = DEFAULT_RETRY_AFTER_CAP) -> dict[str, Any]:
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


def parse_wire(model: type[M], provider: str, body: dict[str, Any]) -> M:
    """Validate a response body with the SDK's own model; a mismatch is a typed error, never a KeyError."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '$'}: {err['msg']}" for err in exc.errors()[:3]
        )
        raise malformed(provider, problems) from None
