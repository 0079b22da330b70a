"""A hostile or malformed ``[worker.quotas]`` table is a typed error naming the field, when the worker loads it."""

from __future__ import annotations

import pytest

from agentsteps.client.quotas import quota_plan
from agentsteps.client.settings import load_settings
from agentsteps.contracts.errors import InvalidSpecError, QuotaConfigError

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

GOOD = """
[[worker.quotas.limits]]
name = "gpt4o"
provider = "openai"
model = "gpt-4o*"
requests_per_minute = 500
input_tokens_per_minute = 30000

[[worker.quotas.tenants]]
name = "acme"
weight = 2
degrade_to = [{ model = "gpt-4o-mini-2024-07-18" }]
[worker.quotas.tenants.budget.day]
tokens_soft = 100000
tokens_hard = 200000
usd_hard = 20.0
"""


def load(tmp_path, text: str):
    path = tmp_path / "agentsteps.toml"
    path.write_text(text)
    return load_settings(path, env={})


def test_a_good_table_loads_and_plans_a_tenants_runs(tmp_path):
    settings = load(tmp_path, GOOD)
    plan = quota_plan(settings, "acme")
    assert plan is not None and plan.tenant_account == "agentsteps-tenant-acme" and plan.weight == 2
    assert plan.route("openai", "gpt-4o-2024-08-06").quota == "gpt4o"
    assert plan.route("openai", "o3-2025-04-16") is None
    assert quota_plan(settings, "unknown-customer").tenant_label == "other", "an unconfigured tenant is 'other'"
    assert quota_plan(load(tmp_path, ""), None) is None, "nothing configured: no plan, no command"


HOSTILE = [
    ("requests_per_minute = 500", "requests_per_minute = -5", "requests_per_minute"),
    ("requests_per_minute = 500", "requests_per_minute = 'many'", "requests_per_minute"),
    ("usd_hard = 20.0", "usd_hard = nan", "usd_hard"),
    ("usd_hard = 20.0", "usd_hard = inf", "usd_hard"),
    ("tokens_soft = 100000", "tokens_soft = 900000", "tokens_soft"),
    ('name = "acme"', 'name = "other"', "name"),
    ('name = "acme"', 'name = "acme corp; DROP"', "name"),
    ('name = "gpt4o"', f'name = "{"q" * 100}"', "name"),
    ("weight = 2", "weight = 0", "weight"),
    ("weight = 2", "weight = 1e300", "weight"),
    ('model = "gpt-4o*"', 'model = "gpt 4o"', "model"),
    ('{ model = "gpt-4o-mini-2024-07-18" }', '{ model = "gpt-4o-latest" }', "degrade_to"),
    ('degrade_to = [{ model = "gpt-4o-mini-2024-07-18" }]', "", "degrade_to"),
    ('provider = "openai"', 'provider = "openia"', "provider"),
    ("requests_per_minute = 500\ninput_tokens_per_minute = 30000", "", "limits nothing"),
    ("weight = 2", "weight = 2\nwieght = 3", "wieght"),
    ("[worker.quotas.tenants.budget.day]", "[worker.quotas.tenants.budget.week]", "week"),
    ('name = "gpt4o"', 'name = "gpt4o"\nlease_seconds = 1e9', "lease_seconds"),
]


@pytest.mark.parametrize(("good", "bad", "named"), HOSTILE, ids=[h[1][:40] or h[2] for h in HOSTILE])
def test_a_hostile_or_malformed_table_is_a_quota_config_error_naming_the_field(tmp_path, good, bad, named):
    assert good in GOOD
    with pytest.raises(QuotaConfigError) as caught:
        load(tmp_path, GOOD.replace(good, bad, 1))
    assert isinstance(caught.value, InvalidSpecError)
    assert named in str(caught.value), str(caught.value)
    assert "$.quotas" in str(caught.value)


def test_two_quotas_with_one_name_or_covering_the_same_models_are_refused(tmp_path):
    twice = GOOD.split("[[worker.quotas.tenants]]")[0] * 2
    with pytest.raises(QuotaConfigError, match="two quotas are named 'gpt4o'"):
        load(tmp_path, twice)
    with pytest.raises(QuotaConfigError, match="both cover openai gpt-4o"):
        load(tmp_path, twice.replace('name = "gpt4o"', 'name = "other4o"', 1))


def test_a_plan_for_a_hostile_tenant_name_is_refused(tmp_path):
    with pytest.raises(QuotaConfigError, match="tenant must be"):
        quota_plan(load(tmp_path, GOOD), "acme\n")
