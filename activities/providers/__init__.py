"""LLM providers over a shared ``httpx.AsyncClient``; none of them retries on its own."""

from .anthropic import AnthropicProvider
from .base import Provider
from .http_errors import classify_exception, classify_response, parse_retry_after, redact
from .openai import OpenAIProvider
from .registry import ProviderSet

__all__ = [
    "AnthropicProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderSet",
    "classify_exception",
    "classify_response",
    "parse_retry_after",
    "redact",
]
