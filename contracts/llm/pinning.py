"""Model pinning: the ``llm.call`` precondition that a model name is a fixed
version, since ``latest`` and bare aliases let a provider change the model
under a running workflow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..json_schema import clip, describe
from ..names import LLM_CALL
from .request import LLMConfig
from .violations import Violation, ViolationKind

CONTRACT = LLM_CALL  # the LLM contract is named after its activity

_TOKEN_SPLIT = re.compile(r"[-_.:/@\s]+")
_NUMERIC_STAMP = re.compile(r"^\d{3,}$")
_VERSION = re.compile(r"^v\d+$")
_SIZE = re.compile(r"^\d+(x\d+)?[bm]$")
_QUANT = re.compile(r"^(q\d+|(int|fp|bf)\d+|awq|gptq|gguf)$")


def _pinned_by_name(model: str) -> bool:
    _, sep, tag = model.partition(":")
    if sep and tag and tag != "latest":
        return True
    return any(
        _NUMERIC_STAMP.match(t) or _VERSION.match(t) or _SIZE.match(t) or _QUANT.match(t)
        for t in _TOKEN_SPLIT.split(model.lower())
    )


def is_latest(model: str) -> bool:
    return "latest" in _TOKEN_SPLIT.split(model.strip().lower())


def is_pinned(model: str, allowed_aliases: Iterable[str] = ()) -> bool:
    """See ``check_model_pinned`` for the rule."""
    name = model.strip()
    if name and name in set(allowed_aliases):
        return True
    return bool(name) and not is_latest(name) and _pinned_by_name(name)


def check_model_pinned(config: LLMConfig, allowed_aliases: Iterable[str], path: str) -> list[Violation]:
    """Reject ``latest`` and bare aliases, which a provider may repoint silently.

    ``path`` is the JSON path of ``config``; the violation's path is
    ``{path}.model``.

    The rule, on the model name split into tokens at ``- _ . : / @``:

    1. A name listed in ``allowed_aliases`` (exact match) always passes.
    2. Otherwise a name with a ``latest`` token fails: ``latest``,
       ``gpt-4o-latest``, ``llama3:latest``.
    3. Otherwise the name is pinned iff it carries a version marker:
       - a tag after ``:`` (Ollama, fine-tunes): ``llama3.1:8b``;
       - a numeric token of 3 or more digits, which covers dates
         (``2024-08-06``, ``20241022``) and snapshot stamps (``gpt-4-0613``,
         ``gemini-1.5-pro-002``);
       - a version token ``v<digits>``: ``scripted-model-v1``, ``mistral-7b-instruct-v0.3``;
       - a size token ``<digits>b`` / ``<digits>m`` / ``8x7b``: ``qwen2.5-7b-instruct``;
       - a quantisation token ``q4``, ``int8``, ``fp16``, ``bf16``, ``awq``, ``gptq``, ``gguf``.
    4. Anything else is a bare alias and fails: ``gpt-4o``, ``gpt-4``,
       ``claude-3-5-sonnet``, ``claude-sonnet-4``, ``llama3``, ``gpt-4-32k``.
    """
    allowed = list(allowed_aliases)
    model = config.model if isinstance(config.model, str) else ""
    if is_pinned(model, allowed):
        return []
    at = f"{path}.model"
    name = model.strip()
    if not name:
        message = "model is empty; name a pinned model version such as 'gpt-4o-2024-08-06'"
    elif is_latest(name):
        message = (
            f"model {describe(name)} asks for 'latest', which the provider can change under you; "
            "name a pinned version (with a date or version suffix) or list it in allowed_model_aliases"
        )
    else:
        message = (
            f"model {describe(name)} is a bare alias that the provider may repoint; pin a version "
            "with a date or version suffix (e.g. 'gpt-4o-2024-08-06', 'claude-sonnet-4-5-20250929', "
            "'llama3.1:8b') or list it in allowed_model_aliases"
        )
    return [Violation(contract=CONTRACT, phase="pre", kind=ViolationKind.unpinned_model, path=at, message=clip(message))]


__all__ = ["CONTRACT", "check_model_pinned", "is_latest", "is_pinned"]
