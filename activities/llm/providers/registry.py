"""The configured providers, keyed by ``LLMConfig.provider``."""

from __future__ import annotations

from urllib.parse import urlparse

import httpx2

from ....contracts.config.settings import ProviderSettings
from ....contracts.llm.capabilities import ModelCapability, capability_for
from ....contracts.errors import NonRetryableProviderError
from .anthropic import AnthropicProvider
from .base import Provider
from .openai import OpenAIProvider

_OFFICIAL_OPENAI_HOST = "api.openai.com"


class ProviderSet:
    def __init__(self, settings: ProviderSettings, http: httpx2.AsyncClient) -> None:
        self._settings = settings
        common = {"timeout": settings.request_timeout_seconds, "retry_after_cap": settings.retry_after_cap_seconds,
                  "capabilities": settings.models}
        self._providers: dict[str, Provider] = {
            "openai": OpenAIProvider(http, base_url=settings.openai_base_url, api_key=settings.openai_api_key,
                                     **common),
            "anthropic": AnthropicProvider(http, base_url=settings.anthropic_base_url,
                                           api_key=settings.anthropic_api_key, api_version=settings.anthropic_version,
                                           caching=settings.prompt_caching, **common),
        }

    def capability(self, provider: str, model: str) -> ModelCapability:
        return capability_for(provider, model, self._settings.models)

    def get(self, name: str) -> Provider:
        """The provider, or ``NonRetryableProviderError`` naming the missing setting."""
        s = self._settings
        if name == "openai":
            # Local OpenAI-compatible servers (vLLM, Ollama, the scripted model) need no key.
            if s.openai_api_key is None and urlparse(s.openai_base_url).hostname == _OFFICIAL_OPENAI_HOST:
                raise NonRetryableProviderError(f"OPENAI_API_KEY is not set; it is required for {s.openai_base_url}")
        elif name == "anthropic":
            if s.anthropic_api_key is None:
                raise NonRetryableProviderError("ANTHROPIC_API_KEY is not set; it is required for the anthropic provider")
        if name not in self._providers:
            raise NonRetryableProviderError(f"unknown provider {name!r}; expected one of {sorted(self._providers)}")
        return self._providers[name]
