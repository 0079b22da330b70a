"""API key names: how a model call, a quota and the worker's config say which key of a provider to use.

A name is all that ever leaves the worker. The worker maps each name to an
environment variable (or secrets-folder file) holding the secret
(``[worker.providers] openai_keys``); ``default`` is the provider's own key
(``OPENAI_API_KEY``), so a config that names no key means what it always did.
A name is plain (it reaches history, error messages and ``agentsteps quota
show``), and a value that is not plain is never echoed back: it may be a
secret pasted where its name belongs.
"""

from __future__ import annotations

import re

DEFAULT_API_KEY = "default"

API_KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."""

ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

KEY_NAME_RULE = "an API key name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def key_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name an API key (without quoting it: it may be the secret itself), or None."""
    if not isinstance(name, str) or not API_KEY_NAME.fullmatch(name):
        return KEY_NAME_RULE + " (the name, never the key itself)"
    if name.startswith(("sk-", "sk_")):
        return "an API key name may not start with 'sk-': that looks like the key itself; name it instead"
    return None


def shown(name: str) -> str:
    """``name`` quoted for a message, or a placeholder when it is not a plain name (it may be a secret)."""
    return repr(name) if key_name_problem(name) is None else "(a value that is not a key name)"


__all__ = ["API_KEY_NAME", "DEFAULT_API_KEY", "ENV_VAR_NAME", "KEY_NAME_RULE", "key_name_problem", "shown"]
