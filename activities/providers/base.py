"""What every LLM provider is, and the single HTTP exchange they all share.

Providers hold no retry logic: Temporal retries the ``llm.call`` activity, so
each attempt is visible in history and retries never multiply.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from ...contracts.llm.request import LLMRequest, LLMResponse
from .http_errors import classify_response, json_body, malformed, translated_transport_errors

M = TypeVar("M", bound=BaseModel)


class Provider(Protocol):
    name: str

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """One provider call; raises ``RetryableProviderError`` or ``NonRetryableProviderError``."""
        ...


async def post_json(
    http: httpx.AsyncClient,
    provider: str,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    *,
    timeout: float | None,
    secret: str | None,
) -> dict[str, Any]:
    secrets = (secret,)
    with translated_transport_errors(provider, secrets):
        extra = {} if timeout is None else {"timeout": timeout}
        response = await http.post(url, json=payload, headers=headers, **extra)
    if not response.is_success:
        raise classify_response(provider, response, secrets)
    return json_body(provider, response, secrets)


def parse_wire(model: type[M], provider: str, body: dict[str, Any]) -> M:
    """Validate a response body; missing fields or wrong types become a typed error, never a KeyError."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '$'}: {err['msg']}" for err in exc.errors()[:3]
        )
        raise malformed(provider, problems) from None
