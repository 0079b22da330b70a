"""The offline model of the embedded stack: with no API key, a worker the CLI starts answers from a script.

``agentsteps dev`` (and ``run`` or ``chat`` when they start their own worker)
with neither ``OPENAI_API_KEY`` nor ``ANTHROPIC_API_KEY`` and the providers'
default URLs would fail every model call with "OPENAI_API_KEY is not set".
Instead it serves the scripted model (a test double, as the demo does) with
``examples/offline_script.json``, says so, and routes both wire formats to it,
whatever model a spec names. The script covers what the README teaches: the
demo agent, a chat about the weather, a refund that waits for approval, a
code-mode program and the stalled-ticket monitor's nudges. It has no
``times`` limits, so two workers that each serve it answer alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources

from ..contracts.config.settings import ProviderSettings, WorkerSettings
from ..scripted_model import Script, ScriptedModelServer

SCRIPT_NAME = "offline_script.json"


@dataclass(frozen=True)
class Models:
    settings: WorkerSettings
    """The settings the worker runs with (model URLs pointed at the offline model when it serves)."""
    offline_digest: str | None
    """The script's digest when the offline model serves, else None."""
    note: str


def offline_script_text() -> str:
    return resources.files("agentsteps.examples").joinpath(SCRIPT_NAME).read_text()


def wants_offline(settings: WorkerSettings) -> bool:
    """No key (named ones included) and no provider URL of the user's own: nothing could answer a model call
    but the offline model."""
    p, default = settings.providers, ProviderSettings()
    return (
        p.openai_api_key is None
        and p.anthropic_api_key is None
        and not p.openai_keys
        and not p.anthropic_keys
        and p.openai_base_url == default.openai_base_url
        and p.anthropic_base_url == default.anthropic_base_url
    )


@contextmanager
def worker_models(settings: WorkerSettings) -> Iterator[Models]:
    """The settings a CLI-started worker runs with, serving the offline model when ``wants_offline``."""
    if not wants_offline(settings):
        yield Models(settings, None, "model calls go to the providers configured in your environment")
        return
    text = offline_script_text()
    with ScriptedModelServer(Script.model_validate_json(text)) as server:
        providers = settings.providers.model_copy(
            update={"openai_base_url": server.url_openai, "anthropic_base_url": server.url_anthropic}
        )
        note = (
            f"no OPENAI_API_KEY or ANTHROPIC_API_KEY: every model call is answered by the offline scripted "
            f"model (a test double, not a model) at {server.url_openai}, from examples/{SCRIPT_NAME}"
        )
        yield Models(
            settings.model_copy(update={"providers": providers}), hashlib.sha256(text.encode()).hexdigest()[:12], note
        )


__all__ = ["Models", "offline_script_text", "wants_offline", "worker_models"]
