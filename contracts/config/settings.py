"""Worker settings: loaded once (see ``client/settings.py``) and injected, never read at import.

Secrets are ``SecretStr`` so a stray ``repr`` or log line shows ``**********``.
They stay in the worker: nothing here is ever put in a workflow input.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

from ..llm.capabilities import ModelCapability


class ProviderSettings(BaseModel):
    openai_api_key: SecretStr | None = None
    openai_base_url: str = "https://api.openai.com/v1"
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str = "https://api.anthropic.com"
    request_timeout_seconds: float = 120.0
    retry_after_cap_seconds: float = 120.0
    """A provider's ``Retry-After`` is handed to Temporal, but never longer than this."""
    anthropic_version: str | None = None
    """The ``anthropic-version`` header; unset means the pinned SDK's own."""
    prompt_caching: bool = True
    """Anthropic: mark the system prompt, tools and conversation prefix with ``cache_control``."""
    models: list[ModelCapability] = Field(default_factory=list)
    """Per-model capabilities (temperature, structured output), before the built-in table."""


class PriceTable(BaseModel):
    """USD per million tokens, by model name; unknown models cost 0 and say so in docs."""

    input_per_mtok: dict[str, float] = Field(default_factory=dict)
    output_per_mtok: dict[str, float] = Field(default_factory=dict)
    cached_input_per_mtok: dict[str, float] = Field(default_factory=dict)
    """Cache reads; a model missing here pays its full input price for them."""
    cache_write_per_mtok: dict[str, float] = Field(default_factory=dict)
    """Cache writes (Anthropic: 1.25x input); a model missing here pays its full input price."""


class TracingSettings(BaseModel):
    """OpenTelemetry tracing; nothing is exported unless ``otlp_endpoint`` is set."""

    otlp_endpoint: str | None = None
    """OTLP/HTTP base URL (e.g. ``http://collector:4318``); needs the ``otlp`` extra."""
    capture_content: bool = False
    """Record prompts and responses on spans. Off by default: they may hold personal data."""
    service_name: str = "agentsteps-worker"


class PayloadStoreSettings(BaseModel):
    """Where large payloads and code-mode snapshots live (one store for both)."""

    threshold_bytes: int = 256 * 1024
    """Payloads at least this large leave Temporal history for the store."""
    local_dir: Path | None = None
    """Defaults to ``<state_dir>/payloads``."""
    s3_bucket: str | None = None
    """Set to use the SDK's S3 driver instead of the local directory (needs ``aioboto3``)."""
    s3_endpoint_url: str | None = None
    s3_region: str | None = None


class WorkerSettings(BaseModel):
    temporal_address: str | None = None
    """A cluster's ``host:port``; unset means the embedded dev server."""
    namespace: str = "default"
    task_queue: str = "agentsteps"
    state_dir: Path = Path(".agentsteps")
    metrics_port: int = 9464
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    prices: PriceTable = Field(default_factory=PriceTable)
    config_file: Path | None = None
    """The TOML file these settings came from; MCP servers are declared there too."""
    tool_factories: list[str] = Field(
        default_factory=lambda: [
            "agentsteps.examples.demo_tools:build_registry",
            "agentsteps.examples.support_tools:build_registry",
        ]
    )
    """``module:function`` entries; each function takes these settings and returns a ToolRegistry."""
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    payload_store: PayloadStoreSettings = Field(default_factory=PayloadStoreSettings)
    secrets_dir: Path | None = None
    """Folder of secret files (``NAME`` holds secret ``NAME``) for ``secret:`` references; read before the environment."""
    snapshot_key: SecretStr | None = None
    """HMAC key signing code-mode snapshots; unset means a key file under ``state_dir``."""
