"""LLM providers on the official SDKs over one shared ``httpx2.AsyncClient``; none of them retries on its own."""

from .anthropic import AnthropicProvider
from .base import Provider
from .errors import classify_exception, classify_response, classify_sdk_error, parse_retry_after, redact
from .openai import OpenAIProvider
from .registry import ProviderSet

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
