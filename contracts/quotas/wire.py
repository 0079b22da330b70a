"""What crosses between a run and an account workflow, and what an operator reads and changes.

A run signals ``acquire`` (a ``LeaseRequest``) to the account and waits for its
``LeaseGrant`` signal; after the call it signals ``release`` with the real use.
Workflows cannot send each other Updates, so the run-to-account path is
signals both ways; the operator's path (read, raise a limit) is a query and
the ``set_limits`` Update, validated before it reaches history.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..llm.api_keys import DEFAULT_API_KEY
from ..persisted_ids import AccountKind, account_id
from .config import DegradeModel, Period, PeriodBudget, QuotaLimit, TenantBudget


class LeaseRequest(BaseModel):
    request_id: str
    requester: str
    """The workflow id the grant is signalled to."""
    tenant: str = "default"
    weight: float = 1.0
    model: str = ""
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    usd: float = Field(default=0.0, ge=0)


class BudgetRatio(BaseModel):
    period: Period
    limit: Literal["soft", "hard"]
    ratio: float


class LeaseGrant(BaseModel):
    request_id: str
    account: str
    requester: str = ""
    """The workflow id the grant goes to."""
    """The quota's or tenant's name."""
    granted: bool = True
    queued: bool = False
    """The request waited in the account's queue before this grant."""
    degrade: bool = False
    """A tenant past a soft limit: the call goes to the tenant's ``degrade_to`` model."""
    refused: str | None = None
    """Why not: a hard budget spent, or a request larger than the quota itself."""
    period: Period | None = None
    utilization: float = 0.0
    """The binding per-minute limit's share in use once this grant is counted."""
    budget: list[BudgetRatio] = Field(default_factory=list)


class LeaseRelease(BaseModel):
    request_id: str
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    throttled: bool = False
    """The provider answered 429 at least once before this call ended: the quota lowers its effective limits."""


class QuotaRoute(BaseModel):
    quota: str
    provider: str
    model: str
    account: str
    api_key: str = Field(default=DEFAULT_API_KEY, exclude_if=lambda name: name == DEFAULT_API_KEY)
    """The key name whose calls the quota counts (left out when default: a plan recorded before keys replays)."""

    def matches(self, provider: str, model: str, api_key: str = DEFAULT_API_KEY) -> bool:
        if provider != self.provider or api_key != self.api_key:
            return False
        return model.startswith(self.model[:-1]) if self.model.endswith("*") else model == self.model


class QuotaPlan(BaseModel):
    """Which accounts a run's model calls go through; resolved from the config where the run starts.

    Absent (``None`` on the input): the run issues no quota command at all.
    """

    model_config = ConfigDict(frozen=True)

    tenant: str = "default"
    tenant_label: str = "other"
    """The metric label: the tenant's name when configured, else ``other`` (bounded)."""
    weight: float = 1.0
    tenant_account: str | None = None
    routes: list[QuotaRoute] = Field(default_factory=list)
    """Most specific first: the first match is the call's quota."""
    degrade_to: list[DegradeModel] = Field(default_factory=list)
    prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """USD per million input and output tokens by model, from the price table (estimates only)."""

    def route(self, provider: str, model: str, api_key: str = DEFAULT_API_KEY) -> QuotaRoute | None:
        """The quota of a call to ``model`` on the key named ``api_key``; two keys never share one."""
        return next((r for r in self.routes if r.matches(provider, model, api_key)), None)

    def estimate_usd(self, model: str, input_tokens: int, output_tokens: int) -> float:
        per_in, per_out = self.prices.get(model, (0.0, 0.0))
        return (input_tokens * per_in + output_tokens * per_out) / 1_000_000


class PeriodUse(BaseModel):
    key: str = ""
    """The period it counts (``2026-12-01``, ``2026-12``); a new key starts from zero."""
    tokens: int = 0
    usd: float = 0.0


class AccountView(BaseModel):
    """What ``agentsteps quota show`` / ``budget show`` print: the live limits and their use."""

    name: str
    kind: AccountKind
    quota: QuotaLimit | None = None
    tenant: TenantBudget | None = None
    requests_in_window: int = 0
    input_tokens_in_window: int = 0
    output_tokens_in_window: int = 0
    concurrent: int = 0
    waiting: int = 0
    utilization: float = 0.0
    effective: QuotaLimit | None = None
    """A quota's limits in force now: the configured ones, or lower after a provider 429 until it recovers."""
    effective_factor: float = 1.0
    throttled_at: float | None = None
    waiting_by_tenant: dict[str, int] = Field(default_factory=dict)
    served_per_weight: dict[str, float] = Field(default_factory=dict)
    """A quota's fair-share clock by tenant: tokens granted / weight (tenants waiting are served lowest first)."""
    spent: dict[str, PeriodUse] = Field(default_factory=dict)
    reserved_tokens: int = 0
    reserved_usd: float = 0.0


class LimitChange(BaseModel):
    """The ``set_limits`` Update: the fields given replace the live ones (validated like the config)."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: int | None = Field(default=None, gt=0)
    input_tokens_per_minute: int | None = Field(default=None, gt=0)
    output_tokens_per_minute: int | None = Field(default=None, gt=0)
    concurrent_requests: int | None = Field(default=None, gt=0)
    weight: float | None = Field(default=None, gt=0, le=1_000_000)
    period: Period | None = None
    budget: PeriodBudget | None = None
    """With ``period``: the limits given replace that period's; the others stay."""


__all__ = [
    "AccountKind",
    "AccountView",
    "BudgetRatio",
    "LeaseGrant",
    "LeaseRelease",
    "LeaseRequest",
    "LimitChange",
    "PeriodUse",
    "QuotaPlan",
    "QuotaRoute",
    "account_id",
]
