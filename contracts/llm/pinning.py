"""Model pinning: the ``llm.call`` precondition that a model name is a fixed
version, since ``latest`` and bare aliases let a provider change the model
under a running workflow.

The rule has two parts and no guessing:

1. A name the operator lists in ``allowed_model_aliases`` (exact match) passes.
2. Otherwise the name must end in a snapshot suffix of its provider's known
   forms (``SNAPSHOT_FORMS``). Anything else fails, however version-like it
   looks: ``deepseek-v3`` and ``claude-sonnet-4`` are repointed families,
   ``llama3.1:8b`` and ``mymodel:prod`` are mutable tags.

The forms, per provider (``openai`` also covers OpenAI-compatible servers):

- ``openai``: ``-YYYY-MM-DD`` (``gpt-4o-2024-08-06``); the legacy four-digit
  snapshot ``-MMDD``, optionally ``-preview`` (``gpt-4-0613``,
  ``gpt-4-1106-preview``; also Mistral's ``-YYMM``, ``mistral-large-2411``);
  a three-digit revision ``-NNN`` (``gemini-1.5-pro-002``); ``-YYYYMMDD``
  (Claude snapshots behind an OpenAI-compatible proxy); and fine-tune ids
  ``ft:<base>:<org>:<suffix>:<id>``, which are immutable.
- ``anthropic``: ``-YYYYMMDD`` (``claude-sonnet-4-5-20250929``), and the
  Vertex AI spelling ``@YYYYMMDD`` (``claude-3-5-sonnet-v2@20241022``).

Dates must be real calendar dates. A name containing ``latest`` never passes
the rule (only the operator's list).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date

from ..json_schema import clip, describe
from ..names import LLM_CALL
from ..violations import Violation, ViolationKind
from .request import LLMConfig

CONTRACT = LLM_CALL  # the LLM contract is named after its activity

_DASHED_DATE = re.compile(r"-(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})$")
_COMPACT_DATE = re.compile(r"-(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})$")
_VERTEX_DATE = re.compile(r"@(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})$")
_FOUR_DIGIT_SNAPSHOT = re.compile(r"-\d{4}(-preview)?$")
_REVISION = re.compile(r"-\d{3}$")
_FINE_TUNE = re.compile(r"^ft:[^:\s]+:[^:\s]*:[^:\s]*:[^:\s]+$")
_LATEST = re.compile(r"(^|[-_.:/@\s])latest($|[-_.:/@\s])")

SNAPSHOT_FORMS: dict[str, tuple[str, ...]] = {
    "openai": ("-YYYY-MM-DD", "-MMDD", "-MMDD-preview", "-NNN", "-YYYYMMDD", "ft:<base>:<org>:<suffix>:<id>"),
    "anthropic": ("-YYYYMMDD", "@YYYYMMDD"),
}
"""The documented forms, for messages and docs/agent-spec.md; ``_has_snapshot_suffix`` is their code."""


def _real_date(match: re.Match[str] | None) -> bool:
    if match is None:
        return False
    try:
        date(int(match["y"]), int(match["m"]), int(match["d"]))
    except ValueError:
        return False
    return True


def _has_snapshot_suffix(provider: str, model: str) -> bool:
    if provider == "anthropic":
        return _real_date(_COMPACT_DATE.search(model)) or _real_date(_VERTEX_DATE.search(model))
    return bool(
        _FINE_TUNE.match(model)
        or _real_date(_DASHED_DATE.search(model))
        or _real_date(_COMPACT_DATE.search(model))
        or _FOUR_DIGIT_SNAPSHOT.search(model)
        or _REVISION.search(model)
    )


def is_latest(model: str) -> bool:
    return _LATEST.search(model.strip().lower()) is not None


def is_pinned(model: str, allowed_aliases: Iterable[str] = (), provider: str = "openai") -> bool:
    """See the module docstring for the rule."""
    name = model.strip()
    if name and name in set(allowed_aliases):
        return True
    return bool(name) and not is_latest(name) and _has_snapshot_suffix(provider, name)


def check_model_pinned(config: LLMConfig, allowed_aliases: Iterable[str], path: str) -> list[Violation]:
    """Reject any model that is neither listed by the operator nor carries a snapshot suffix.

    ``path`` is the JSON path of ``config``; the violation's path is ``{path}.model``.
    """
    allowed = list(allowed_aliases)
    model = config.model if isinstance(config.model, str) else ""
    provider = config.provider if isinstance(config.provider, str) else "openai"
    if is_pinned(model, allowed, provider):
        return []
    at = f"{path}.model"
    name = model.strip()
    forms = ", ".join(f"'{f}'" for f in SNAPSHOT_FORMS.get(provider, SNAPSHOT_FORMS["openai"]))
    if not name:
        message = "model is empty; name a pinned model version such as 'gpt-4o-2024-08-06'"
    elif is_latest(name):
        message = (
            f"model {describe(name)} asks for 'latest', which the provider can change under you; "
            f"name a snapshot (a {provider} model ending in one of {forms}) or list it in allowed_model_aliases"
        )
    else:
        message = (
            f"model {describe(name)} is not pinned: a {provider} model is pinned when it ends in one of "
            f"{forms} (e.g. 'gpt-4o-2024-08-06', 'claude-sonnet-4-5-20250929'); otherwise it is an alias "
            "the provider may repoint, accepted only if listed in allowed_model_aliases"
        )
    return [
        Violation(contract=CONTRACT, phase="pre", kind=ViolationKind.unpinned_model, path=at, message=clip(message))
    ]


__all__ = ["CONTRACT", "SNAPSHOT_FORMS", "check_model_pinned", "is_latest", "is_pinned"]
