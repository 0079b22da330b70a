"""The configured providers, keyed by ``LLMConfig.provider`` and the call's key name (``LLMConfig.api_key``).

Each key is its own SDK client on the one shared HTTP client: ``default`` is
the provider's own key (``OPENAI_API_KEY``), the others are the named keys the
worker resolved at start (``client.settings.provider_keys``). A call naming a
key this worker lacks fails non-retryably, naming the key and the provider,
never a secret.

A provider's adapter, its SDK client and the SDK itself are built on the first
call that uses it (``get``), never at start: a worker that only calls OpenAI-compatible
models never imports ``anthropic``, nor one calling only Claude ``openai``'s client. The activity
``await``s ``load`` first, so that import (about a second of CPU for ``anthropic``) runs in a thread, not
on the event loop every activity and poller of the worker shares.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable, Mapping
from typing import TypedDict
from urllib.parse import urlparse

import httpx2
from pydantic import SecretStr

from ....contracts.config.settings import ProviderSettings
from ....contracts.errors import NonRetryableProviderError
from ....contracts.llm.api_keys import DEFAULT_API_KEY, shown
from ....contracts.llm.capabilities import ModelCapability, capability_for
from .base import Provider

_OFFICIAL_OPENAI_HOST = "api.openai.com"
_OFFICIAL_ANTHROPIC_HOST = "api.anthropic.com"
_MODULES = {"openai": f"{__package__}.openai", "anthropic": f"{__package__}.anthropic"}


class _CommonOptions(TypedDict):
    """What every provider's client takes from the settings, whichever its API."""

    timeout: float | None
    retry_after_cap: float | None
    capabilities: list[ModelCapability] | None


class ProviderSet:
    def __init__(
        self,
        settings: ProviderSettings,
        http: httpx2.AsyncClient,
        keys: Mapping[str, Mapping[str, SecretStr]] | None = None,
    ) -> None:
        self._settings = settings
        common: _CommonOptions = {
            "timeout": settings.request_timeout_seconds,
            "retry_after_cap": settings.retry_after_cap_seconds,
            "capabilities": settings.models,
        }

        def openai_on(key: SecretStr | None) -> Provider:
            from .openai import OpenAIProvider

            return OpenAIProvider(http, base_url=settings.openai_base_url, api_key=key, **common)

        def anthropic_on(key: SecretStr | None) -> Provider:
            from .anthropic import AnthropicProvider

            return AnthropicProvider(
                http,
                base_url=settings.anthropic_base_url,
                api_key=key,
                api_version=settings.anthropic_version,
                caching=settings.prompt_caching,
                **common,
            )

        self._build: dict[str, Callable[[SecretStr | None], Provider]] = {
            "openai": openai_on,
            "anthropic": anthropic_on,
        }
        self._keys: dict[tuple[str, str], SecretStr | None] = {
            ("openai", DEFAULT_API_KEY): settings.openai_api_key,
            ("anthropic", DEFAULT_API_KEY): settings.anthropic_api_key,
        }
        for provider, named in (keys or {}).items():
            if provider not in self._build:
                raise KeyError(provider)
            for name, secret in named.items():
                self._keys[(provider, name)] = secret
        self._providers: dict[tuple[str, str], Provider] = {}
        self._loading: dict[str, asyncio.Task[object]] = {}

    async def load(self, name: str) -> None:
        """Import provider ``name``'s module and SDK off the event loop, once per process (concurrent first
        calls share the one import); an unknown name is left to ``get``, which says what is wrong."""
        module = _MODULES.get(name)
        if module is None or (module in sys.modules and name not in self._loading):
            return
        if name not in self._loading:
            self._loading[name] = asyncio.create_task(asyncio.to_thread(importlib.import_module, module))
        await asyncio.shield(self._loading[name])

    def _provider(self, name: str, api_key: str) -> Provider:
        """The adapter on the key, built (and its SDK imported) on its first use."""
        provider = self._providers.get((name, api_key))
        if provider is None:
            provider = self._providers[(name, api_key)] = self._build[name](self._keys[(name, api_key)])
        return provider

    def capability(self, provider: str, model: str) -> ModelCapability:
        return capability_for(provider, model, self._settings.models)

    def get(self, name: str, api_key: str = DEFAULT_API_KEY) -> Provider:
        """The provider on the named key, or ``NonRetryableProviderError`` naming the missing setting or key."""
        s = self._settings
        if name not in ("openai", "anthropic"):
            raise NonRetryableProviderError(f"unknown provider {name!r}; expected one of ['anthropic', 'openai']")
        if api_key != DEFAULT_API_KEY:
            if (name, api_key) not in self._keys:
                have = sorted(k for p, k in self._keys if p == name)
                raise NonRetryableProviderError(
                    f"the {name} API key {shown(api_key)} is not configured on this worker (it has "
                    f"{', '.join(have)}): declare it in [worker.providers] {name}_keys, or name one of those"
                )
            return self._provider(name, api_key)
        # Servers of one's own (vLLM, Ollama, a proxy, the scripted model: the offline model of the embedded
        # stack answers both formats) need no key; the providers' own APIs do.
        if name == "openai":
            if s.openai_api_key is None and urlparse(s.openai_base_url).hostname == _OFFICIAL_OPENAI_HOST:
                raise NonRetryableProviderError(f"OPENAI_API_KEY is not set; it is required for {s.openai_base_url}")
        elif s.anthropic_api_key is None and urlparse(s.anthropic_base_url).hostname == _OFFICIAL_ANTHROPIC_HOST:
            raise NonRetryableProviderError(f"ANTHROPIC_API_KEY is not set; it is required for {s.anthropic_base_url}")
        return self._provider(name, DEFAULT_API_KEY)
