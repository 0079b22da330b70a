"""Resolves ``secret:NAME`` references in the worker, at connect time.

A secret is looked up first as a file ``<secrets_dir>/<NAME>`` (the shape of
Docker and Kubernetes secret mounts), then as the environment variable
``NAME``. Values never appear in error messages: only names do. Which folder
and which environment are settings (``client.settings.secret_sources``); this
module only reads the secrets themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ...contracts.config.mcp_config import secret_references, substitute_secrets
from ...contracts.mcp import McpConfigError


class SecretResolver:
    def __init__(self, env: Mapping[str, str], secrets_dir: Path | str | None = None) -> None:
        self._env = dict(env)
        self._dir = Path(secrets_dir) if secrets_dir else None

    def get(self, name: str, *, server: str | None = None) -> str:
        if self._dir is not None:
            path = self._dir / name
            if path.is_file():
                return path.read_text().strip()
        value = self._env.get(name)
        if value is None:
            where = f"{self._dir}/{name} or " if self._dir is not None else ""
            raise McpConfigError(f"secret {name!r} is not set ({where}environment variable {name})", server=server)
        return value

    def resolve(self, value: str, *, server: str | None = None) -> str:
        names = secret_references(value)
        if not names:
            return value
        return substitute_secrets(value, {name: self.get(name, server=server) for name in names})

    def resolve_all(self, values: Mapping[str, str], *, server: str | None = None) -> dict[str, str]:
        return {key: self.resolve(value, server=server) for key, value in values.items()}

    def values_in(self, values: Iterable[str], *, server: str | None = None) -> list[str]:
        """The secret values referenced by ``values``; used to scrub them from anything returned."""
        return [self.get(name, server=server) for value in values for name in secret_references(value)]
