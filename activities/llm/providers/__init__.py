"""LLM providers on the official SDKs over one shared ``httpx2.AsyncClient``; none of them retries on its own.

``AnthropicProvider`` and ``OpenAIProvider`` are imported on first access (and their SDK with them): a
worker imports an SDK only when a model of its provider is called (``registry.ProviderSet.get``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Provider
from .errors import classify_exception, classify_response, classify_sdk_error, parse_retry_after, redact
from .registry import ProviderSet

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider
    from .openai import OpenAIProvider


def __getattr__(name: str) -> Any:
    if name == "AnthropicProvider":
        from .anthropic import AnthropicProvider

        return AnthropicProvider
    if name == "OpenAIProvider":
        from .openai import OpenAIProvider

        return OpenAIProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AnthropicProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderSet",
    "classify_exception",
    "classify_response",
    "classify_sdk_error",
    "parse_retry_after",
    "redact",
]
