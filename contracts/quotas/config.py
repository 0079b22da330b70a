"""``[worker.quotas]``: provider quotas and tenant budgets, as an operator declares them.

    [[worker.quotas.limits]]            one shared provider quota
    name, provider, model               ``model`` is a pinned name or a family prefix ending in ``*``
    api_key                             which of the provider's keys, by name ("default": OPENAI_API_KEY's)
    requests_per_minute, input_tokens_per_minute, output_tokens_per_minute, concurrent_requests
    lease_seconds                       a grant not released by then is taken back (a killed worker)
    window_seconds                      the "minute" (60 s; shorter in tests and benchmarks)

    [[worker.quotas.tenants]]           one customer
    name, weight                        weight: its share of a scarce quota against the others'
    lease_seconds                       a reservation not released by then is taken back (a terminated run)
    degrade_to                          the cheaper pinned models a soft limit moves calls to
    [worker.quotas.tenants.budget.day]  and ``.month``: tokens_soft, tokens_hard, usd_soft, usd_hard

Every number must be finite and positive, names plain and unique, a soft
limit at most its hard one: a bad table is a ``QuotaConfigError`` naming the
field before the worker polls, never a run failing later.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..llm.api_keys import DEFAULT_API_KEY, key_name_problem
from ..llm.request import Provider

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""Quota and tenant names: they become workflow ids and metric labels."""

_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}\*?")

Period = Literal["day", "month"]
PERIODS: tuple[Period, ...] = ("day", "month")


def tenant_problem(tenant: str | None) -> str | None:
    """Why ``tenant`` cannot name a tenant (checked by the workflow too, so a bad one fails typed)."""
    if tenant is not None and not NAME.fullmatch(tenant):
        return "tenant must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    return None


def _positive(value: float | None, field: str) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise ValueError(f"{field} must be a finite number above 0, not {value!r}")
    return value


class QuotaLimit(BaseModel):
    """One provider quota every worker shares; unset dimensions are unlimited."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    provider: Provider = "openai"
    model: str = "*"
    """A pinned model name, or a family prefix ending in ``*`` (``gpt-4o*``; ``*`` alone: every model)."""
    api_key: str = DEFAULT_API_KEY
    """The NAME of the provider key the quota belongs to (``default``: ``OPENAI_API_KEY``'s; others are
    declared in ``[worker.providers] openai_keys``): two keys of one provider have quotas of their own."""
    requests_per_minute: int | None = Field(default=None, gt=0)
    input_tokens_per_minute: int | None = Field(default=None, gt=0)
    output_tokens_per_minute: int | None = Field(default=None, gt=0)
    concurrent_requests: int | None = Field(default=None, gt=0)
    lease_seconds: float = 300.0
    """A grant its run has not released by then is taken back: longer than a call with its retries."""
    window_seconds: float = 60.0
    """The "minute" the per-minute limits count over (a sliding window); shorter only in tests and benchmarks."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError("a quota name is 1-64 letters, digits, '.', '_' or '-'")
        return value

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if value != "*" and not _MODEL.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a model name or a family prefix ending in '*'")
        return value

    @field_validator("api_key")
    @classmethod
    def _api_key(cls, value: str) -> str:
        problem = key_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("lease_seconds", "window_seconds")
    @classmethod
    def _lease(cls, value: float, info: object) -> float:
        field = getattr(info, "field_name", "seconds")
        _positive(value, field)
        if value > 86_400:
            raise ValueError(f"{field} must be at most a day")
        return value

    @model_validator(mode="after")
    def _something(self) -> QuotaLimit:
        if not any(
            (
                self.requests_per_minute,
                self.input_tokens_per_minute,
                self.output_tokens_per_minute,
                self.concurrent_requests,
            )
        ):
            raise ValueError(f"quota {self.name!r} limits nothing: set at least one per-minute or concurrent limit")
        return self

    def matches(self, provider: str, model: str, api_key: str = DEFAULT_API_KEY) -> bool:
        if provider != self.provider or api_key != self.api_key:
            return False
        if self.model.endswith("*"):
            return model.startswith(self.model[:-1])
        return model == self.model


class PeriodBudget(BaseModel):
    """One period's budget; a soft limit degrades calls, a hard one refuses them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens_soft: int | None = Field(default=None, gt=0)
    tokens_hard: int | None = Field(default=None, gt=0)
    usd_soft: float | None = None
    usd_hard: float | None = None

    @field_validator("usd_soft", "usd_hard")
    @classmethod
    def _usd(cls, value: float | None, info: object) -> float | None:
        return _positive(value, getattr(info, "field_name", "usd"))

    @model_validator(mode="after")
    def _ordered(self) -> PeriodBudget:
        for unit in ("tokens", "usd"):
            soft, hard = getattr(self, f"{unit}_soft"), getattr(self, f"{unit}_hard")
            if soft is not None and hard is not None and soft > hard:
                raise ValueError(f"{unit}_soft ({soft}) is above {unit}_hard ({hard})")
        return self


class DegradeModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider = "openai"
    model: str
    api_key: str | None = Field(default=None, exclude_if=lambda name: name is None)
    """The key name degraded calls use; unset: the call's own."""

    @field_validator("model")
    @classmethod
    def _pinned(cls, value: str) -> str:
        if not _MODEL.fullmatch(value) or value.endswith("*") or value.endswith("latest"):
            raise ValueError(f"{value[:80]!r} is not a pinned model name")
        return value

    @field_validator("api_key")
    @classmethod
    def _api_key(cls, value: str | None) -> str | None:
        problem = None if value is None else key_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class TenantBudget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    weight: float = 1.0
    """Its share of a scarce quota against the other tenants' weights."""
    budget: dict[Period, PeriodBudget] = Field(default_factory=dict)
    degrade_to: list[DegradeModel] = Field(default_factory=list)
    """Past a soft limit, calls go to the first of these (a cheaper pinned model)."""
    lease_seconds: float = 300.0
    """A call's reservation its run has not released by then is taken back (a terminated or timed-out run):
    longer than a call with its retries. The call's real use still counts when it is released later."""

    @field_validator("lease_seconds")
    @classmethod
    def _lease(cls, value: float) -> float:
        _positive(value, "lease_seconds")
        if value > 86_400:
            raise ValueError("lease_seconds must be at most a day")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME.fullmatch(value) or value == "other":
            raise ValueError("a tenant name is 1-64 letters, digits, '.', '_' or '-' (and not 'other')")
        return value

    @field_validator("weight")
    @classmethod
    def _weight(cls, value: float) -> float:
        _positive(value, "weight")
        if value > 1_000_000:
            raise ValueError("weight must be at most 1000000")
        return value

    @model_validator(mode="after")
    def _soft_needs_chain(self) -> TenantBudget:
        soft = any(b.tokens_soft is not None or b.usd_soft is not None for b in self.budget.values())
        if soft and not self.degrade_to:
            raise ValueError(f"tenant {self.name!r} has a soft limit but no degrade_to model to degrade to")
        return self

    @property
    def has_budget(self) -> bool:
        return bool(self.budget)


class QuotaSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limits: list[QuotaLimit] = Field(default_factory=list, max_length=1000)
    tenants: list[TenantBudget] = Field(default_factory=list, max_length=10_000)

    @model_validator(mode="after")
    def _unique(self) -> QuotaSettings:
        for kind, names in (("quota", [q.name for q in self.limits]), ("tenant", [t.name for t in self.tenants])):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise ValueError(f"two {kind}s are named {name!r}")
                seen.add(name)
        keys: dict[tuple[str, str, str], str] = {}
        for q in self.limits:
            key = (q.provider, q.model, q.api_key)
            if key in keys:
                raise ValueError(
                    f"quotas {keys[key]!r} and {q.name!r} both cover {q.provider} {q.model} on key {q.api_key!r}"
                )
            keys[key] = q.name
        return self

    def undeclared_key(self, declared: Callable[[str], Iterable[str]]) -> str | None:
        """Why a quota names a key the worker does not declare (``declared(provider)``: its key names), or None."""
        for i, q in enumerate(self.limits):
            names = list(declared(q.provider))
            if q.api_key not in names:
                return (
                    f"limits[{i}].api_key: quota {q.name!r} counts {q.provider} key {q.api_key!r}, which "
                    f"[worker.providers] {q.provider}_keys does not declare (declared: {', '.join(names)})"
                )
        for i, t in enumerate(self.tenants):
            for j, target in enumerate(t.degrade_to):
                names = list(declared(target.provider))
                if target.api_key is not None and target.api_key not in names:
                    return (
                        f"tenants[{i}].degrade_to[{j}].api_key: tenant {t.name!r} degrades to {target.provider} "
                        f"{target.model} on key {target.api_key!r}, which [worker.providers] {target.provider}_keys "
                        f"does not declare (declared: {', '.join(names)})"
                    )
        return None

    def unreachable_degrade(self, providers: Iterable[str]) -> str | None:
        """Why a tenant's ``degrade_to`` entry names a provider the worker is not deployed for (``providers``: its
        ``required_providers``, when it lists any), or None: its calls would find no key."""
        required = list(providers)
        for i, t in enumerate(self.tenants):
            for j, target in enumerate(t.degrade_to):
                if required and target.provider not in required:
                    return (
                        f"tenants[{i}].degrade_to[{j}].provider: tenant {t.name!r} degrades to {target.provider} "
                        f"{target.model}, but required_providers lists only {', '.join(required)}: its calls "
                        "would find no key"
                    )
        return None

    @property
    def configured(self) -> bool:
        return bool(self.limits) or any(t.has_budget for t in self.tenants)

    def tenant(self, name: str | None) -> TenantBudget | None:
        return next((t for t in self.tenants if t.name == name), None)

    def quota_for(self, provider: str, model: str, api_key: str = DEFAULT_API_KEY) -> QuotaLimit | None:
        """The most specific quota covering the model on that key: an exact name, then the longest family prefix."""
        matching = [q for q in self.limits if q.matches(provider, model, api_key)]
        return max(matching, key=lambda q: (not q.model.endswith("*"), len(q.model)), default=None)


__all__ = [
    "tenant_problem",
    "NAME",
    "PERIODS",
    "DegradeModel",
    "Period",
    "PeriodBudget",
    "QuotaLimit",
    "QuotaSettings",
    "TenantBudget",
]
