"""Load worker settings once, from the environment and an optional TOML file.

This is the only place that reads settings from the environment or the config
file; everything else receives a ``WorkerSettings`` (or, for the MCP server
table, the ``McpConfig`` read here from the same file). Secrets are wrapped in
``SecretStr`` on the way in.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import SecretStr, TypeAdapter, ValidationError

from ..contracts import InvalidSpecError, Violation, ViolationKind
from ..contracts.config.mcp_config import McpConfig, parse_mcp_config
from ..contracts.config.settings import PROVIDER_KEY_ENV, WorkerSettings
from ..contracts.errors import DeploymentConfigError, QuotaConfigError
from ..contracts.llm.api_keys import DEFAULT_API_KEY
from ..contracts.mcp import McpConfigError

DEFAULT_CONFIG_FILE = "agentsteps.toml"
CONFIG_ENV = "AGENTSTEPS_CONFIG"
SECRETS_DIR_ENV = "AGENTSTEPS_SECRETS_DIR"

_ENV_FIELDS: dict[str, tuple[str, ...]] = {
    "TEMPORAL_ADDRESS": ("temporal_address",),
    "TEMPORAL_NAMESPACE": ("namespace",),
    "AGENTSTEPS_DEV_PORT": ("dev_port",),
    "AGENTSTEPS_DEV_UI_PORT": ("dev_ui_port",),
    "AGENTSTEPS_SERVER_LOST_SECONDS": ("server_lost_seconds",),
    "AGENTSTEPS_TASK_QUEUE": ("task_queue",),
    "AGENTSTEPS_STATE_DIR": ("state_dir",),
    "AGENTSTEPS_METRICS_PORT": ("metrics_port",),
    SECRETS_DIR_ENV: ("secrets_dir",),
    "OPENAI_API_KEY": ("providers", "openai_api_key"),
    "OPENAI_BASE_URL": ("providers", "openai_base_url"),
    "ANTHROPIC_API_KEY": ("providers", "anthropic_api_key"),
    "ANTHROPIC_BASE_URL": ("providers", "anthropic_base_url"),
    "OTEL_EXPORTER_OTLP_ENDPOINT": ("tracing", "otlp_endpoint"),
    "OTEL_SERVICE_NAME": ("tracing", "service_name"),
    "AGENTSTEPS_TRACE_CONTENT": ("tracing", "capture_content"),
    "AGENTSTEPS_SNAPSHOT_KEY": ("snapshot_key",),
    "AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS": ("snapshot_previous_keys",),
    "AGENTSTEPS_SINGLE_WORKER": ("single_worker",),
    "AGENTSTEPS_SANDBOX_PROCESSES": ("sandbox_processes",),
    "AGENTSTEPS_GRACEFUL_SHUTDOWN_SECONDS": ("graceful_shutdown_seconds",),
    "AGENTSTEPS_MAX_CONCURRENT_ACTIVITIES": ("max_concurrent_activities",),
    "AGENTSTEPS_MAX_CONCURRENT_WORKFLOW_TASKS": ("max_concurrent_workflow_tasks",),
    "AGENTSTEPS_MAX_CACHED_WORKFLOWS": ("max_cached_workflows",),
    "AGENTSTEPS_REQUIRED_PROVIDERS": ("required_providers",),
    "AGENTSTEPS_CONSOLE_HOST": ("console", "host"),
    "AGENTSTEPS_CONSOLE_PORT": ("console", "port"),
    "AGENTSTEPS_CONSOLE_TOKEN": ("console", "token"),
    "AGENTSTEPS_CONSOLE_PROXY_USER_HEADER": ("console", "proxy_user_header"),
    "AGENTSTEPS_TEMPORAL_UI_URL": ("console", "temporal_ui_url"),
    "AGENTSTEPS_GRAFANA_URL": ("console", "grafana_url"),
    "AGENTSTEPS_PAYLOAD_S3_BUCKET": ("payload_store", "s3_bucket"),
    "AGENTSTEPS_PAYLOAD_S3_PREFIX": ("payload_store", "s3_prefix"),
    # The usual AWS variables, the more specific one last so it wins.
    "AWS_DEFAULT_REGION": ("payload_store", "s3_region"),
    "AWS_REGION": ("payload_store", "s3_region"),
    "AWS_ENDPOINT_URL": ("payload_store", "s3_endpoint_url"),
    "AWS_ENDPOINT_URL_S3": ("payload_store", "s3_endpoint_url"),
    "AWS_ACCESS_KEY_ID": ("payload_store", "s3_access_key_id"),
    "AWS_SECRET_ACCESS_KEY": ("payload_store", "s3_secret_access_key"),
    "AWS_SESSION_TOKEN": ("payload_store", "s3_session_token"),
}

# Variables holding lists: comma-separated (keys are hex or base64, never commas).
_LIST_ENV = {"AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS", "AGENTSTEPS_REQUIRED_PROVIDERS"}


def load_settings(config_path: str | Path | None = None, env: Mapping[str, str] | None = None) -> WorkerSettings:
    """File values first, then environment variables on top (the 12-factor order)."""
    env = os.environ if env is None else env
    named = config_path or env.get(CONFIG_ENV)
    path = Path(named or DEFAULT_CONFIG_FILE)
    data: dict[str, Any] = {}
    if path.is_file():
        data = read_toml(path).get("worker", {})
        data["config_file"] = str(path)
    elif named:
        # A file the operator named must exist; only the implicit default may be absent.
        raise InvalidSpecError([_config_violation("$", f"config file {str(path)!r} does not exist")])
    for var, keys in _ENV_FIELDS.items():
        value = env.get(var)
        if value:
            target = data
            for key in keys[:-1]:
                target = target.setdefault(key, {})
            raw = [v.strip() for v in value.split(",") if v.strip()] if var in _LIST_ENV else value
            target[keys[-1]] = _from_env(keys, raw)
    try:
        # Strict: a file's "500" or true for a number is refused, not read as 500 or 1 (JSON mode, so a path or a
        # secret may still be a string). Environment values are all text and were typed by ``_from_env``.
        return WorkerSettings.model_validate_json(json.dumps(data, default=_toml_value), strict=True)
    except ValidationError as exc:
        if exc.errors() and all(e["loc"][:1] == ("quotas",) for e in exc.errors()):
            raise QuotaConfigError.from_validation(exc, "config") from None
        raise InvalidSpecError.from_validation(exc, "config") from None


def _from_env(keys: tuple[str, ...], value: str | list[str]) -> Any:
    """An environment variable's text as the JSON value of the field it sets (``"7233"`` -> 7233,
    ``"true"`` -> true); text the field's type cannot read is left for validation to refuse, naming the field."""
    model: Any = WorkerSettings
    for key in keys[:-1]:
        model = model.model_fields[key].annotation
    adapter: TypeAdapter[Any] = TypeAdapter(model.model_fields[keys[-1]].annotation)
    try:
        adapter.validate_json(json.dumps(value), strict=True)
        return value  # already the right JSON type (text, a path, a secret): never round-tripped
    except ValidationError:
        pass
    try:
        return adapter.dump_python(adapter.validate_python(value), mode="json")
    except ValidationError:
        return value


def _toml_value(value: object) -> object:
    """A TOML date or time, which no setting is: kept apart from text, so strict validation refuses it."""
    return {"toml_datetime": str(value)}


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InvalidSpecError([_config_violation("$", f"{path}: not valid TOML: {exc}")]) from None


def load_mcp_config(path: str | Path | None) -> McpConfig:
    """The ``[mcp.servers.NAME]`` tables of ``path`` (normally ``settings.config_file``); none without a file.

    MCP problems are ``McpConfigError`` rather than ``InvalidSpecError`` so
    ``agentsteps tools`` and the worker report them as MCP configuration.
    """
    if path is None:
        return McpConfig()
    resolved = Path(path)
    try:
        document = tomllib.loads(resolved.read_text())
    except FileNotFoundError:
        raise McpConfigError(f"config file {resolved} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise McpConfigError(f"{resolved}: not valid TOML: {exc}") from None
    return parse_mcp_config(document, origin=str(resolved))


def secret_sources(
    settings: WorkerSettings, env: Mapping[str, str] | None = None
) -> tuple[Mapping[str, str], Path | None]:
    """Where the worker resolves ``secret:NAME``: the secrets folder, then the environment variables.

    ``load_settings`` already put ``$AGENTSTEPS_SECRETS_DIR`` into
    ``settings.secrets_dir``; settings built in code (tests, embedding
    backends) still honour the variable, as they always have.
    """
    env = os.environ if env is None else env
    directory = settings.secrets_dir or env.get(SECRETS_DIR_ENV) or None
    return env, Path(directory) if directory else None


def provider_keys(settings: WorkerSettings, env: Mapping[str, str] | None = None) -> dict[str, dict[str, SecretStr]]:
    """The secrets of every named provider key (``[worker.providers] openai_keys``): provider -> name -> key.

    Read where ``secret:NAME`` is (the secrets folder, then the environment) when a worker is built. A
    declared key whose variable is unset or empty, or two names holding one secret (their quotas would
    count one key twice), is a ``DeploymentConfigError`` naming the keys and variables, never a value:
    the worker refuses to start instead of failing every call on that key later.
    """
    env, secrets_dir = secret_sources(settings, env)
    providers = settings.providers
    found: dict[str, dict[str, SecretStr]] = {}
    problems: list[str] = []
    for provider in PROVIDER_KEY_ENV:
        default = getattr(providers, f"{provider}_api_key")
        holders: dict[str, str] = {default.get_secret_value(): DEFAULT_API_KEY} if default else {}
        for name, var in sorted(providers.named_keys(provider).items()):
            value = _secret_value(var, env, secrets_dir)
            if not value:
                where = f"{secrets_dir}/{var} or " if secrets_dir is not None else ""
                problems.append(f"{provider} key {name!r} reads {where}environment variable {var}, which is not set")
            elif value in holders:
                problems.append(
                    f"{provider} keys {holders[value]!r} and {name!r} hold the same key: its quota "
                    "would be counted twice; declare it once"
                )
            else:
                holders[value] = name
                found.setdefault(provider, {})[name] = SecretStr(value)
    if problems:
        raise DeploymentConfigError(
            "[worker.providers] declares API keys this worker cannot use: " + "; ".join(problems) + "."
        )
    return found


def _secret_value(name: str, env: Mapping[str, str], secrets_dir: Path | None) -> str:
    if secrets_dir is not None and (secrets_dir / name).is_file():
        return (secrets_dir / name).read_text().strip()
    return env.get(name, "").strip()


def _config_violation(path: str, message: str) -> Violation:
    return Violation(contract="config", phase="pre", kind=ViolationKind.invalid_config, path=path, message=message)
