"""Worker settings: loaded once (see ``client/settings.py``) and injected, never read at import.

Every section refuses keys it does not define: a misspelt or removed key in a
config file fails at start-up, naming it, instead of being silently ignored
(``docs/compatibility.md``).

Secrets are ``SecretStr`` so a stray ``repr`` or log line shows ``**********``.
They stay in the worker: nothing here is ever put in a workflow input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from ..approvals import WebhookFilter
from ..llm.api_keys import DEFAULT_API_KEY, ENV_VAR_NAME, key_name_problem
from ..llm.capabilities import ModelCapability
from ..quotas.config import QuotaSettings

PROVIDER_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
"""The variable of each provider's ``default`` key."""


class ProviderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    openai_keys: dict[str, str] = Field(default_factory=dict)
    """More OpenAI keys, by name: ``acme = "OPENAI_KEY_ACME"``, the environment variable (or secrets-folder
    file) holding the secret, never the secret itself. ``default`` is ``openai_api_key``; a model call picks
    a key with ``api_key = "acme"`` and a quota counts one key (``docs/quotas.md``)."""
    anthropic_keys: dict[str, str] = Field(default_factory=dict)
    """The same for Anthropic (``default`` is ``anthropic_api_key``)."""

    @field_validator("openai_keys", "anthropic_keys")
    @classmethod
    def _named_keys(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        provider = str(info.field_name).removesuffix("_keys")
        own = PROVIDER_KEY_ENV[provider]
        seen: dict[str, str] = {}
        for name, var in value.items():
            if name == DEFAULT_API_KEY:
                raise ValueError(f"'default' is the {provider} key of {own}; give the other keys other names")
            problem = key_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
            # The value is never quoted: it may be the secret pasted where its variable's name belongs.
            if not isinstance(var, str) or not ENV_VAR_NAME.fullmatch(var):
                raise ValueError(
                    f"key {name!r}: the value must name the environment variable holding the key "
                    "(letters, digits and '_'), never the key itself"
                )
            if var == own:
                raise ValueError(
                    f"key {name!r} reads {own}, the 'default' key: one key under two names would count its quota twice"
                )
            if var in seen:
                raise ValueError(
                    f"keys {seen[var]!r} and {name!r} both read {var}: one key under two names "
                    "would count its quota twice"
                )
            seen[var] = name
        return value

    def key_names(self, provider: str) -> list[str]:
        """``default`` and the provider's named keys: what a call's ``api_key`` may say on this worker."""
        return [DEFAULT_API_KEY, *sorted(self.named_keys(provider))]

    def named_keys(self, provider: str) -> dict[str, str]:
        """Key name -> the variable holding it, for ``provider``'s keys other than ``default``."""
        return dict(getattr(self, f"{provider}_keys", {}))


class PriceTable(BaseModel):
    """USD per million tokens, by model name; unknown models cost 0 and say so in docs."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: dict[str, float] = Field(default_factory=dict)
    output_per_mtok: dict[str, float] = Field(default_factory=dict)
    cached_input_per_mtok: dict[str, float] = Field(default_factory=dict)
    """Cache reads; a model missing here pays its full input price for them."""
    cache_write_per_mtok: dict[str, float] = Field(default_factory=dict)
    """Cache writes (Anthropic: 1.25x input); a model missing here pays its full input price."""

    def per_model(self) -> dict[str, tuple[float, float]]:
        """Model -> (input, output) USD per million tokens: what a quota plan estimates a call with."""
        return {
            model: (self.input_per_mtok.get(model, 0.0), self.output_per_mtok.get(model, 0.0))
            for model in sorted({*self.input_per_mtok, *self.output_per_mtok})
        }


class TracingSettings(BaseModel):
    """OpenTelemetry tracing; nothing is exported unless ``otlp_endpoint`` is set."""

    model_config = ConfigDict(extra="forbid")

    otlp_endpoint: str | None = None
    """OTLP/HTTP base URL (e.g. ``http://collector:4318``); needs the ``otlp`` extra."""
    capture_content: bool = False
    """Record prompts and responses on spans. Off by default: they may hold personal data."""
    service_name: str = "agentsteps-worker"


class PayloadStoreSettings(BaseModel):
    """Where large payloads and code-mode snapshots live (one store for both)."""

    model_config = ConfigDict(extra="forbid")

    threshold_bytes: int = 256 * 1024
    """Payloads at least this large leave Temporal history for the store."""
    local_dir: Path | None = None
    """Defaults to ``<state_dir>/payloads``."""
    s3_bucket: str | None = None
    """Set to use the SDK's S3 driver instead of the local directory (the ``s3`` extra)."""
    s3_prefix: str = ""
    """Key prefix inside the bucket (``agentsteps/`` keeps the bucket shareable); the same on every worker."""
    s3_endpoint_url: str | None = None
    """An S3-compatible server (MinIO, Ceph, moto); unset means AWS."""
    s3_region: str | None = None
    s3_access_key_id: SecretStr | None = None
    """Unset: the AWS SDK's own chain (web identity, instance profile, ``~/.aws``)."""
    s3_secret_access_key: SecretStr | None = None
    s3_session_token: SecretStr | None = None

    @property
    def shared(self) -> bool:
        """Whether every worker can reach this store (a local directory cannot be assumed to be)."""
        return self.s3_bucket is not None


class ApprovalWebhook(BaseModel):
    """Where a waiting call is told (``[[worker.approval_webhooks]]``): docs/console.md, "Webhooks"."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    """Named in the run's history when it accepted a notice (the URL never is)."""
    url: SecretStr
    """``http(s)://...``; a secret too (a Slack incoming webhook's URL is its credential)."""
    secret: SecretStr
    """Shared with the receiver: ``X-AgentSteps-Signature`` is an HMAC-SHA256 under it."""
    tools: list[str] = Field(default_factory=list)
    """Only calls of these tools; empty: every tool that requires approval."""
    agents: list[str] = Field(default_factory=list)
    """Only calls made by these specs (by name); empty: every agent."""
    shape: Literal["agentsteps", "slack"] = "agentsteps"
    """``slack``: only ``text`` and ``blocks`` (a Slack incoming webhook); ``agentsteps``: those and ``approval``."""
    console_url: str = ""
    """The console's address as approvers reach it: each notice links to the call's card there."""
    timeout_seconds: float = Field(default=5.0, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _http(cls, url: SecretStr) -> SecretStr:
        if not url.get_secret_value().startswith(("http://", "https://")):
            raise ValueError("an approval webhook's url starts with http:// or https://")
        return url

    def wants(self, tool: str, agent: str) -> bool:
        return self.filter().wants(tool, agent)

    def filter(self) -> WebhookFilter:
        return WebhookFilter(tools=self.tools, agents=self.agents)


class ConsoleSettings(BaseModel):
    """``agentsteps console`` (and the console ``agentsteps dev`` starts): docs/console.md."""

    host: str = "127.0.0.1"
    """Loopback by default. Any other address needs ``token`` or ``proxy_user_header``."""
    port: int = Field(default=8234, ge=1, le=65535)
    token: SecretStr | None = None
    """Asked once per browser (then a cookie), or sent as ``Authorization: Bearer``; compared in constant time."""
    proxy_user_header: str | None = None
    """Behind the deployment's auth proxy (oauth2-proxy, an ingress with SSO): the header in which it
    names the signed-in person (e.g. ``X-Forwarded-User``). A request without it is refused, and the
    name is recorded as the approver. Only set it when nothing but the proxy can reach the console."""
    link_secret: SecretStr | None = None
    """Signs the approve/reject links of approval webhooks' notices (the worker signs, the console checks:
    both read it). A link opens a confirmation page behind the console's sign-in; it never decides alone."""
    people: dict[str, SecretStr] = Field(default_factory=dict)
    """A token per person (``name = token``): whoever signs in with one decides as that name, verified,
    never typed. Beside or instead of ``token`` (which says nobody's name)."""
    temporal_ui_url: str | None = None
    """Base URL of the Temporal UI for the run links (``agentsteps dev`` fills in its own)."""
    grafana_url: str | None = None
    """Base URL of Grafana; the run links open the ``agentsteps-oncall`` dashboard on the run's time window."""

    @field_validator("people")
    @classmethod
    def _people_distinct(cls, people: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name in people:
            if not name.strip() or len(name) > 200 or not name.isprintable():
                raise ValueError(f"console.people: {name!r} is not a name (printable, 1 to 200 characters)")
        tokens = [t.get_secret_value() for t in people.values()]
        if len(set(tokens)) != len(tokens) or any(len(t) < 12 for t in tokens):
            raise ValueError("console.people: each person needs their own token of at least 12 characters")
        return people


DEMO_TOOL_FACTORIES = (
    "agentsteps.examples.demo_tools:build_registry",
    "agentsteps.examples.support_tools:build_registry",
)


class WorkerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    temporal_address: str | None = None
    """A cluster's ``host:port``; unset means the embedded dev server."""
    dev_port: int = Field(default=7233, ge=1, le=65535)
    """The embedded dev server's port on 127.0.0.1 (``agentsteps dev --port``); every command
    without ``temporal_address`` looks for the stack there."""
    dev_ui_port: int = Field(default=8233, ge=1, le=65535)
    """The embedded dev server's web UI port."""
    server_lost_seconds: float = Field(default=10.0, gt=0, le=3600)
    """How long ``agentsteps dev`` and ``agentsteps worker`` go on while the Temporal server does not answer
    before they say so and exit (code 3)."""
    namespace: str = "default"
    temporal_grpc_compression: Literal["none", "gzip"] = "none"
    """Whether the engine's connection to Temporal gzips its messages. The engine keeps its payloads
    small (conversations and large results go by reference), so gzip costs the worker and the server
    CPU on every message for little saved: ``none``. ``gzip`` (the SDK's default) for a slow link."""
    task_queue: str = "agentsteps"
    state_dir: Path = Path(".agentsteps")
    metrics_port: int = 9464
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    prices: PriceTable = Field(default_factory=PriceTable)
    config_file: Path | None = None
    """The TOML file these settings came from; MCP servers are declared there too."""
    tool_factories: list[str] | None = None
    """``module:function`` entries; each function takes these settings and returns a ToolRegistry.
    Unset: the demo tools for the embedded stack (demo, dev, tests), none for ``agentsteps worker``."""
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    payload_store: PayloadStoreSettings = Field(default_factory=PayloadStoreSettings)
    secrets_dir: Path | None = None
    """Folder of secret files (``NAME`` holds secret ``NAME``) for ``secret:`` references; read before the env."""
    snapshot_key: SecretStr | None = None
    """HMAC key signing code-mode snapshots; unset means a key file under ``state_dir``."""
    snapshot_previous_keys: list[SecretStr] = Field(default_factory=list)
    """Keys rotated out: snapshots they signed still load, new ones are signed with ``snapshot_key``."""
    sandbox_processes: int | None = Field(default=None, ge=1)
    """Monty sandbox processes per worker; unset means the CPU count, which in a container is the
    node's, not the pod's limit: set it where resources are limited (deploy/k8s does)."""
    max_concurrent_activities: int | None = Field(default=None, ge=1)
    """Activity slots (LLM and tool calls at once); unset: the SDK's 100. Size it to the pod (deploy/k8s does)."""
    max_concurrent_workflow_tasks: int | None = Field(default=None, ge=1)
    """Workflow-task slots; unset: the SDK's 100."""
    max_cached_workflows: int | None = Field(default=None, ge=0)
    """Runs kept in memory between tasks (the sticky cache); unset: the SDK's 1000. Each holds its history."""
    sticky_queue_timeout_seconds: float | None = Field(default=None, gt=0)
    """How long a cached run's next task waits for its worker before any worker takes it (replaying the
    run): after a worker dies, its runs stand still this long. Unset: the SDK's 10 s."""
    required_providers: list[Literal["openai", "anthropic"]] = Field(default_factory=list)
    """Providers this deployment's runs use: ``agentsteps worker`` refuses to start without their API key,
    so a pod missing its Secret fails at once with a message instead of failing every run later."""
    graceful_shutdown_seconds: float = Field(default=150.0, ge=0)
    """On SIGTERM/SIGINT: stop polling, then let running activities finish for this long before
    cancelling them. Longer than the LLM call's start-to-close (120 s), so a rolling restart never
    throws away a paid model call; Kubernetes' terminationGracePeriodSeconds must exceed it."""
    stop_margin_seconds: float = Field(default=20.0, gt=0)
    """After ``graceful_shutdown_seconds``, how long a stop may still take before the process exits
    with status 4 (``cli/hard_stop.py``: what a healthy stop does in that time, and why 20)."""
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    approval_webhooks: list[ApprovalWebhook] = Field(default_factory=list)
    """Who hears of a call waiting for approval, per tool or agent (``approval.notify``): docs/console.md."""
    quotas: QuotaSettings = Field(default_factory=QuotaSettings)
    """Provider quotas and tenant budgets every worker shares (docs/quotas.md); empty: none, and runs
    issue no quota command at all."""
    single_worker: bool = False
    """The operator declares that one worker serves this cluster's task queue, so a local payload
    store and a key file are enough; without it a worker on a cluster needs a shared store and key."""

    @field_validator("quotas")
    @classmethod
    def _quota_keys_declared(cls, quotas: QuotaSettings, info: ValidationInfo) -> QuotaSettings:
        """Every cross-reference of the quota table, refused at load: a quota or a ``degrade_to`` entry on a key the
        worker does not declare, a ``degrade_to`` provider outside ``required_providers``."""
        providers = info.data.get("providers")
        if isinstance(providers, ProviderSettings):
            problem = quotas.undeclared_key(providers.key_names)
            if problem is not None:
                raise ValueError(problem)
        problem = quotas.unreachable_degrade(info.data.get("required_providers") or ())
        if problem is not None:
            raise ValueError(problem)
        return quotas


__all__ = [
    "ApprovalWebhook",
    "ConsoleSettings",
    "PayloadStoreSettings",
    "PriceTable",
    "ProviderSettings",
    "TracingSettings",
    "WorkerSettings",
]
